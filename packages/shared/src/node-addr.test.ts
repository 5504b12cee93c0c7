import { describe, expect, it } from '@jest/globals';
import { isLoopbackAddr, nodeAddrRefusal } from './node-addr.js';

describe('nodeAddrRefusal (issue 27, finding 7: the gateway would POST prompts to any mgmt_addr)', () => {
  it('takes unicast addresses and host names', () => {
    for (const a of ['10.0.0.5', '192.168.1.20', '8.8.8.8', 'fd00::5', '2001:db8::1', 'gpu-1.lan', 'gpu-1.example.com', 'node7', '::ffff:10.0.0.1'])
      expect([a, nodeAddrRefusal(a, false)]).toEqual([a, undefined]);
  });

  it.each([
    ['169.254.169.254', 'link-local'],
    ['169.254.0.1', 'link-local'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['ff02::1', 'multicast'],
    ['::7f00:1', 'IPv4-compatible'],
    ['2130706433', 'a number'],
    ['0x7f000001', 'a number'],
    ['127.1', 'a number'],
    ['0177.0.0.1', 'a number'],
    ['10.0.0.05', 'a number'],
    ['gpu.2130706433', 'a number'],
  ])('%s is refused (%s), loopback allowed or not', (addr, why) => {
    expect(nodeAddrRefusal(addr, false)).toContain(why);
    expect(nodeAddrRefusal(addr, true)).toContain(why);
  });

  it('answers the same when asked again, each answer remembered for its own option', () => {
    // Allowed first, then asked without the option: a loopback address must still be refused.
    for (let i = 0; i < 3; i++) {
      expect(nodeAddrRefusal('127.0.0.9', true)).toBeUndefined();
      expect(nodeAddrRefusal('127.0.0.9', false)).toContain('--allow-loopback-nodes');
      expect(nodeAddrRefusal('169.254.169.254', true)).toContain('link-local');
      expect(nodeAddrRefusal('10.1.2.3', false)).toBeUndefined();
    }
  });

  it('loopback only with the single-machine option', () => {
    for (const a of ['127.0.0.1', '127.3.4.5', '::1', 'localhost', 'LOCALHOST', 'x.localhost', '::ffff:127.0.0.1']) {
      expect(isLoopbackAddr(a)).toBe(true);
      expect(nodeAddrRefusal(a, false)).toContain('--allow-loopback-nodes');
      expect(nodeAddrRefusal(a, true)).toBeUndefined();
    }
  });
});
