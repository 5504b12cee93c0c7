import { describe, expect, it } from '@jest/globals';
import type { Model } from '@llmgw/shared';
import { DomainError } from '../errors.js';
import { memoryStore } from '../store/testing.js';
import { admit, authenticate } from './admission.js';
import { KeyRing } from './keys.js';

const model = (name: string) => ({ name }) as Model;
const codeOf = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    if (e instanceof DomainError) return { code: e.code, retryAfterS: e.details.retryAfterS, field: e.field };
    throw e;
  }
  return undefined;
};

describe('admission', () => {
  it('takes the key from a bearer header, and refuses a missing or unknown one', async () => {
    const ring = new KeyRing(memoryStore(), () => 0);
    const { secret } = await ring.create({ name: 'k' }, (m) => m);
    expect(authenticate(ring, `Bearer ${secret}`).name).toBe('k');
    expect(codeOf(() => authenticate(ring, undefined))?.code).toBe('unauthenticated');
    expect(codeOf(() => authenticate(ring, 'Bearer sk-llmgw-nope'))?.code).toBe('unauthenticated');
    await ring.close();
  });

  it('refuses a model outside the key, and says when to come back after the per-minute limit', async () => {
    const ring = new KeyRing(memoryStore(), () => 30_000);
    const { secret } = await ring.create({ name: 'k', models: ['a'], rpm: 1 }, (m) => m);
    const key = authenticate(ring, `Bearer ${secret}`);
    expect(codeOf(() => admit(ring, key, model('b')))).toEqual({ code: 'model_not_allowed', retryAfterS: undefined, field: 'model' });
    expect(codeOf(() => admit(ring, key, model('a')))).toBeUndefined();
    expect(codeOf(() => admit(ring, key, model('a')))).toEqual({ code: 'rate_limited', retryAfterS: 60, field: undefined });
    await ring.close();
  });

  it('gives the concurrency slot back on release', async () => {
    const ring = new KeyRing(memoryStore(), () => 0);
    const { secret } = await ring.create({ name: 'k', max_concurrent: 1 }, (m) => m);
    const key = authenticate(ring, `Bearer ${secret}`);
    const release = admit(ring, key, model('a'));
    expect(codeOf(() => admit(ring, key, model('a')))?.code).toBe('concurrency_limited');
    release();
    expect(codeOf(() => admit(ring, key, model('a')))).toBeUndefined();
    await ring.close();
  });
});
