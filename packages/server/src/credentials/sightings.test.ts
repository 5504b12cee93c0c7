import { describe, expect, it } from '@jest/globals';
import { CredentialSightings, type Sighting } from './sightings.js';

const A: Sighting = { peer: '10.0.0.5', mgmtAddr: '10.0.0.5', hostname: 'gpu-1' };
const B: Sighting = { peer: '10.0.0.66', mgmtAddr: '10.0.0.66', hostname: 'attacker' };
const live = 15_000;

describe('CredentialSightings (issue 27, finding 8)', () => {
  it('one credential heard alternately from two places is a conflict at the first return', () => {
    const s = new CredentialSightings({ liveMs: live, bind: false });
    expect(s.seen('n', A, 0).kind).toBe('ok');
    expect(s.seen('n', B, 1000).kind).toBe('ok');
    const v = s.seen('n', A, 2000);
    expect(v.kind).toBe('conflict');
    if (v.kind !== 'conflict') return;
    expect(v.conflict.other).toEqual(B);
    expect(v.conflict.back).toEqual(A);
    expect(v.conflict.reason).toContain(
      'heard from 10.0.0.66 (mgmt_addr 10.0.0.66, hostname attacker) and 10.0.0.5 (mgmt_addr 10.0.0.5, hostname gpu-1) at once',
    );
    expect(s.seen('n', B, 3000).kind).toBe('conflict');
  });

  it('a hostname alone differing is another place', () => {
    const s = new CredentialSightings({ liveMs: live, bind: false });
    s.seen('n', A, 0);
    s.seen('n', { ...A, hostname: 'other' }, 1000);
    expect(s.seen('n', A, 2000).kind).toBe('conflict');
  });

  it('a node that moves once, or comes back after the old place went silent, is no conflict', () => {
    const s = new CredentialSightings({ liveMs: live, bind: false });
    s.seen('n', A, 0);
    for (let t = 1000; t < 60_000; t += 1000) expect(s.seen('n', B, t).kind).toBe('ok');
    expect(s.seen('n', A, 60_000 + live).kind).toBe('ok');
    // Credentials are per node: another node from B is nothing.
    expect(s.seen('m', B, 1).kind).toBe('ok');
  });

  it('with binding, a second place is refused while the first is live, and taken once it fell silent', () => {
    const s = new CredentialSightings({ liveMs: live, bind: true });
    s.seen('n', A, 0);
    const v = s.seen('n', B, 1000);
    expect(v.kind).toBe('refused');
    if (v.kind === 'refused') {
      expect(v.message).toContain('--bind-credentials');
      expect(v.message).not.toContain('10.0.0.5');
    }
    expect(s.seen('n', A, 2000).kind).toBe('ok');
    expect(s.seen('n', B, 2000 + live).kind).toBe('ok');
    expect(s.seen('n', A, 3000 + live).kind).toBe('refused');
  });
});
