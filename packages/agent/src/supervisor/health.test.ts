import { describe, expect, it } from '@jest/globals';
import { modelIds, probeHost, probeTimeoutMs } from './health.js';

describe('health probes', () => {
  it('probe a wildcard bind through loopback, IPv6 in brackets', () => {
    expect(probeHost('0.0.0.0')).toBe('127.0.0.1');
    expect(probeHost('')).toBe('127.0.0.1');
    expect(probeHost('::')).toBe('[::1]');
    expect(probeHost('fd00::1')).toBe('[fd00::1]');
    expect(probeHost('10.0.0.2')).toBe('10.0.0.2');
  });

  it('time out at 5 s, sooner when polling fast, never under 250 ms', () => {
    expect(probeTimeoutMs(1000)).toBe(5000);
    expect(probeTimeoutMs(100)).toBe(500);
    expect(probeTimeoutMs(10)).toBe(250);
  });

  it('read the served names from an OpenAI model list', () => {
    expect(modelIds('{"data":[{"id":"a"},{"id":2},null,{"id":"b"}]}')).toEqual(['a', 'b']);
    expect(modelIds('{"data":{}}')).toEqual([]);
    expect(modelIds('not json')).toEqual([]);
  });
});
