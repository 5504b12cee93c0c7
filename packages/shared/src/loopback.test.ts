import { describe, expect, it } from '@jest/globals';
import { isLoopbackHost } from './loopback.js';

describe('isLoopbackHost (issue 27: any host starting with "127." was loopback)', () => {
  it('is an address of this machine', () => {
    for (const h of ['localhost', '127.0.0.1', '127.1.2.3', '[::1]', '::1', '0:0:0:0:0:0:0:1', '[::ffff:127.0.0.1]', '::ffff:7f00:1'])
      expect([h, isLoopbackHost(h)]).toEqual([h, true]);
  });

  it('is never a name that merely starts like one, nor another address', () => {
    for (const h of ['127.attacker.example', '127.0.0.1.nip.io', 'localhost.example', '10.0.0.1', '::2', '[::ffff:10.0.0.1]', '0.0.0.0', ''])
      expect([h, isLoopbackHost(h)]).toEqual([h, false]);
  });
});
