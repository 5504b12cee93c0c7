import { describe, expect, it } from '@jest/globals';
import { ServerRotation, instanceDown, splitServerList, withFailover } from './servers.js';

const refused = Object.assign(new Error('refused'), { code: 'ECONNREFUSED' });
const badCert = Object.assign(new Error('bad cert'), { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
const retryable = (e: unknown) => instanceDown(e as { code?: string });

describe('splitServerList', () => {
  it('splits on commas, trims, drops trailing slashes, empty entries and repeats', () => {
    expect(splitServerList('https://a:8081')).toEqual(['https://a:8081']);
    expect(splitServerList(' https://a:8081/ , https://b:8081,,https://a:8081,')).toEqual(['https://a:8081', 'https://b:8081']);
    expect(splitServerList(' , ')).toEqual([]);
  });
});

describe('instanceDown', () => {
  it('is a connection failure or a 502/503/504, not a TLS verification failure or another status', () => {
    expect(instanceDown({ code: 'ECONNREFUSED' })).toBe(true);
    expect(instanceDown({ code: 'ECONNRESET' })).toBe(true);
    expect(instanceDown({ code: 'ETIMEDOUT' })).toBe(true);
    expect(instanceDown({ status: 503 })).toBe(true);
    expect(instanceDown({ status: 500 })).toBe(false);
    expect(instanceDown({ status: 401, code: 'ERR_NON_2XX_3XX_RESPONSE' })).toBe(false);
    expect(instanceDown({ code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' })).toBe(false);
    expect(instanceDown({})).toBe(false);
  });
});

describe('withFailover', () => {
  it('moves to the next address on a retryable failure and stays there (sticky)', async () => {
    const r = new ServerRotation(['a', 'b', 'c']);
    const tried: string[] = [];
    const moves: string[] = [];
    const up = new Set(['b', 'c']);
    const attempt = (url: string) => {
      tried.push(url);
      return up.has(url) ? Promise.resolve(url) : Promise.reject(refused);
    };
    expect(await withFailover(r, attempt, retryable, (f, t) => moves.push(`${f}->${t}`))).toBe('b');
    expect(await withFailover(r, attempt, retryable)).toBe('b');
    expect(tried).toEqual(['a', 'b', 'b']);
    expect(moves).toEqual(['a->b']);
    up.delete('b');
    expect(await withFailover(r, attempt, retryable)).toBe('c');
    up.add('a');
    up.delete('c');
    // Wraps around to the first.
    expect(await withFailover(r, attempt, retryable)).toBe('a');
  });

  it('tries each address once, then throws the last failure; one it may not retry is thrown at once', async () => {
    const r = new ServerRotation(['a', 'b']);
    const tried: string[] = [];
    await expect(withFailover(r, (u) => (tried.push(u), Promise.reject(refused)), retryable)).rejects.toBe(refused);
    expect(tried).toEqual(['a', 'b']);
    tried.length = 0;
    await expect(withFailover(r, (u) => (tried.push(u), Promise.reject(badCert)), retryable)).rejects.toBe(badCert);
    expect(tried).toHaveLength(1);
  });

  it('moves once when two requests in flight see the same instance fail', async () => {
    const r = new ServerRotation(['a', 'b', 'c']);
    const moves: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    const attempt = async (url: string) => {
      if (url === 'a') {
        await gate;
        throw refused;
      }
      return url;
    };
    const both = Promise.all([
      withFailover(r, attempt, retryable, (f, t) => moves.push(`${f}->${t}`)),
      withFailover(r, attempt, retryable, (f, t) => moves.push(`${f}->${t}`)),
    ]);
    release();
    expect(await both).toEqual(['b', 'b']);
    expect(moves).toEqual(['a->b']);
    expect(r.current).toBe('b');
  });

  it('with one address, fails as the attempt did', async () => {
    const r = new ServerRotation(['a']);
    expect(r.next('a')).toBeUndefined();
    await expect(withFailover(r, () => Promise.reject(refused), retryable)).rejects.toBe(refused);
  });
});
