import { X509Certificate } from 'node:crypto';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import {
  caFingerprint,
  findBySecret,
  fullJoinToken,
  hashSecret,
  newHashedSecret,
  newSecret,
  parseJoinToken,
  pinMatches,
  renderJoinToken,
  sameSecret,
  writePrivateFile,
} from './index.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});
function tmp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-secrets-'));
  dirs.push(d);
  return d;
}
const mode = (f: string) => fs.statSync(f).mode & 0o777;

describe('generation and hashing', () => {
  it('makes prefixed random secrets of the asked size, never the same twice', () => {
    const a = newSecret('llmgw-x-');
    expect(a).toMatch(/^llmgw-x-[A-Za-z0-9_-]{32}$/);
    expect(newSecret('llmgw-node-', 32)).toMatch(/^llmgw-node-[A-Za-z0-9_-]{43}$/);
    expect(newSecret('llmgw-x-')).not.toBe(a);
  });

  it('stores the SHA-256 in hex, as stores written by earlier versions hold it', () => {
    expect(hashSecret('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const s = newHashedSecret('sk-llmgw-');
    expect(s).toEqual({ secret: expect.stringMatching(/^sk-llmgw-/), hash: hashSecret(s.secret), prefix: s.secret.slice(0, 13) });
  });
});

describe('sameSecret', () => {
  it('is true for the same secret only: one changed character, a prefix or an extension is not', () => {
    const s = 'llmgw-admin-0123456789abcdef';
    expect(sameSecret(s, `${s}`)).toBe(true);
    expect(sameSecret(`${s.slice(0, -1)}0`, s)).toBe(false);
    expect(sameSecret(s.slice(0, -1), s)).toBe(false);
    expect(sameSecret(`${s}x`, s)).toBe(false);
    expect([sameSecret('', ''), sameSecret('', s), sameSecret(s, '')]).toEqual([true, false, false]);
  });

  it('finds a record by its secret, and confirms the record found is the one hashed', () => {
    const byHash = new Map([[hashSecret('right'), { id: 'a', hash: hashSecret('right') }]]);
    expect(findBySecret(byHash, 'right')?.id).toBe('a');
    expect(findBySecret(byHash, 'wrong')).toBeUndefined();
    // A map whose key disagrees with its record's hash (a bug elsewhere) authenticates nothing.
    const skewed = new Map([[hashSecret('right'), { id: 'b', hash: hashSecret('other') }]]);
    expect(findBySecret(skewed, 'right')).toBeUndefined();
    // Nor one whose record holds something of another length.
    const short = new Map([[hashSecret('right'), { id: 'c', hash: hashSecret('right').slice(1) }]]);
    expect(findBySecret(short, 'right')).toBeUndefined();
  });
});

describe('writePrivateFile', () => {
  it('writes 0600 under a umask of 022, also over a 0644 file and a 0644 leftover temporary file', () => {
    const dir = tmp();
    const file = path.join(dir, 'token');
    const old = process.umask(0o022);
    try {
      writePrivateFile(file, 'one\n');
      expect([fs.readFileSync(file, 'utf8'), mode(file)]).toEqual(['one\n', 0o600]);
      fs.chmodSync(file, 0o644);
      fs.writeFileSync(path.join(dir, `.token.${process.pid}.tmp`), 'stale', { mode: 0o644 });
      writePrivateFile(file, Buffer.from('two\n'));
      expect([fs.readFileSync(file, 'utf8'), mode(file)]).toEqual(['two\n', 0o600]);
    } finally {
      process.umask(old);
    }
    expect(fs.readdirSync(dir)).toEqual(['token']);
  });

  it('leaves no temporary file behind when it fails, and throws', () => {
    const dir = tmp();
    const target = path.join(dir, 'busy');
    fs.mkdirSync(target);
    fs.writeFileSync(path.join(target, 'inside'), 'x');
    expect(() => writePrivateFile(target, 'text')).toThrow();
    expect(fs.readdirSync(dir)).toEqual(['busy']);
    expect(() => writePrivateFile(path.join(dir, 'missing', 'f'), 'text')).toThrow(/ENOENT/);
  });

  it('replaces a file atomically: a reader in another process sees the old content or the new, never part of either', async () => {
    const file = path.join(tmp(), 'state.json');
    const size = 1 << 20;
    const a = 'a'.repeat(size);
    const b = 'b'.repeat(size);
    writePrivateFile(file, a);
    // The reader reads until it has seen each version often; a partly written or empty
    // file (what a plain writeFileSync over it shows) counts as bad.
    const reader = `
      const fs = require('node:fs');
      let bad = 0, seenA = 0, seenB = 0;
      for (let i = 0; i < 20000 && (seenA < 20 || seenB < 20); i++) {
        const t = fs.readFileSync(process.argv[1], 'latin1');
        if (t.length === ${size} && t[0] === t[t.length - 1] && (t[0] === 'a' || t[0] === 'b')) t[0] === 'a' ? seenA++ : seenB++;
        else bad++;
      }
      process.stdout.write(JSON.stringify({ bad, seenA, seenB }));`;
    const child = spawn(process.execPath, ['-e', reader, file], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    let done = false;
    const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
    void exited.then(() => (done = true));
    for (let i = 0; !done; i++) {
      writePrivateFile(file, i % 2 ? a : b);
      await new Promise((r) => setImmediate(r));
    }
    await exited;
    const seen = JSON.parse(out) as { bad: number; seenA: number; seenB: number };
    expect(seen.bad).toBe(0);
    expect(Math.min(seen.seenA, seen.seenB)).toBeGreaterThanOrEqual(20);
  });
});

// A self-signed ECDSA P-256 certificate (openssl, valid for 100 years): any CA will do.
const CA = `-----BEGIN CERTIFICATE-----
MIIBljCCAT2gAwIBAgIUNBxFuaMSrhJHHX0yPnyDadnpdJYwCgYIKoZIzj0EAwIw
GDEWMBQGA1UEAwwNbGxtZ3cgdGVzdCBjYTAgFw0yNjEyMDExMjI1MjJaGA8yMTI2
MTEwNzEyMjUyMlowGDEWMBQGA1UEAwwNbGxtZ3cgdGVzdCBjYTBZMBMGByqGSM49
AgEGCCqGSM49AwEHA0IABOmLIITguE2X1C8JtA3x8O5QUR9ke2gAOGOvvekuLAhH
TSz/5DFkj7aJqHx4hm6ZJ/ZOqdhjuYXWWP6WsPlg59WjYzBhMB0GA1UdDgQWBBTz
q1XhWZ+pgwForX8nYzka03qrKDAfBgNVHSMEGDAWgBTzq1XhWZ+pgwForX8nYzka
03qrKDAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQEAwICBDAKBggqhkjOPQQD
AgNHADBEAiAxi9bZO2ON7+pn1wZfaTvgEnFSgNBF7W9G73WbHBuydAIgJAUorkpz
c3le/s/18GXPpx/nBY4awjrhOcs/r/CABK8=
-----END CERTIFICATE-----
`;

describe('the join token', () => {
  it("pins the SHA-256 of the CA's DER, the fingerprint openssl and Node show", () => {
    expect(caFingerprint(CA)).toBe(new X509Certificate(CA).fingerprint256.replaceAll(':', '').toLowerCase());
    expect(fullJoinToken('s3cret', CA)).toBe(`K10${caFingerprint(CA)}::s3cret`);
  });

  it('splits into the secret to send and the pin to check; a bare secret has no pin', () => {
    expect(parseJoinToken(fullJoinToken('a::b', CA))).toEqual({ secret: 'a::b', caHash: caFingerprint(CA) });
    expect(parseJoinToken(' llmgw-join-x\n')).toEqual({ secret: 'llmgw-join-x' });
    expect(parseJoinToken('K10abc::s')).toEqual({ secret: 'K10abc::s', badPin: 'its CA pin (after K10, before ::) has 3 hex digits, not 64' });
    expect(parseJoinToken('K10xyz::s').badPin).toBe('its CA pin (after K10, before ::) is not hex: "xyz"');
  });

  it('renders the full token with a CA, the bare secret without one', () => {
    expect(renderJoinToken('s', CA)).toBe(fullJoinToken('s', CA));
    expect(renderJoinToken('s', undefined)).toBe('s');
  });

  it('matches its own CA only: one changed digit of the pin is a mismatch', () => {
    const pin = caFingerprint(CA);
    expect(pinMatches(pin, CA)).toBe(true);
    expect(pinMatches(`${pin[0] === '0' ? '1' : '0'}${pin.slice(1)}`, CA)).toBe(false);
    expect(pinMatches(pin.slice(2), CA)).toBe(false);
    expect(pinMatches(pin.toUpperCase(), CA)).toBe(true);
  });
});
