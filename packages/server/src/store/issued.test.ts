import { describe, expect, it } from '@jest/globals';
import { hashSecret } from '@llmgw/shared';
import { IssuedSecrets, type IssuedRecord } from './issued.js';

const rec = (id: string, name: string, secret: string): IssuedRecord => ({ id, name, hash: hashSecret(secret) });
const ok = async () => {};

describe('IssuedSecrets', () => {
  it('finds a record by its secret only, and keeps nothing the store refused', async () => {
    const s = new IssuedSecrets([rec('a', 'ci', 'secret-a')]);
    expect([s.find('secret-a')?.id, s.find('secret-b'), s.find(hashSecret('secret-a'))]).toEqual(['a', undefined, undefined]);
    await expect(s.put(rec('b', 'ops', 'secret-b'), () => Promise.reject(new Error('store down')))).rejects.toThrow('store down');
    expect([s.find('secret-b'), s.get('b'), s.all().length]).toEqual([undefined, undefined, 1]);
    await s.put(rec('b', 'ops', 'secret-b'), ok);
    expect(s.find('secret-b')?.id).toBe('b');
  });

  it('revokes by id or by a live name, once; a revoked record is still found, as revoked', async () => {
    const s = new IssuedSecrets([{ ...rec('old', 'ci', 'x'), revokedAt: '2026-01-01T00:00:00.000Z' }, rec('new', 'ci', 'y')]);
    const saved: string[] = [];
    const save = async (r: IssuedRecord) => void saved.push(r.id);
    expect(await s.revoke('ci', '2026-02-01T00:00:00.000Z', save)).toMatchObject({ id: 'new', revokedAt: '2026-02-01T00:00:00.000Z' });
    expect(await s.revoke('new', '2026-03-01T00:00:00.000Z', save)).toMatchObject({ revokedAt: '2026-02-01T00:00:00.000Z' });
    expect([await s.revoke('ci', 'later', save), saved]).toEqual([undefined, ['new']]);
    expect(s.find('y')?.revokedAt).toBe('2026-02-01T00:00:00.000Z');
    // A change made from a copy taken before the revoke keeps the revocation.
    await s.put({ ...rec('new', 'renamed', 'y') }, save);
    expect(s.get('new')).toMatchObject({ name: 'renamed', revokedAt: '2026-02-01T00:00:00.000Z' });
    expect(s.find('y')?.revokedAt).toBe('2026-02-01T00:00:00.000Z');
    // A reload replaces everything memory held.
    s.replace([rec('c', 'other', 'z')]);
    expect([s.find('y'), s.find('z')?.id]).toEqual([undefined, 'c']);
  });
});
