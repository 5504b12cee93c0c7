import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from '@jest/globals';
import got from 'got';
import { download, FetchRefused } from './download.js';
import { hostClasses, RedirectRefused, redirectGuard, type Lookup } from './redirects.js';
import { fileServer } from './test-file-server.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-redirects-'));
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of closers) await c();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Names as a test's DNS would answer them; `.invalid` names never leave the machine. */
const names: Record<string, string[]> = {
  'files.public.invalid': ['93.184.215.14'],
  'metadata.invalid': ['169.254.169.254'],
  'lan.invalid': ['10.1.2.3'],
};
const lookup: Lookup = async (h) => {
  const a = names[h];
  if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${h}`), { code: 'ENOTFOUND' });
  return a;
};

/** A server on 127.0.0.1 that redirects every request to `to`. */
async function redirector(to: string): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  const s = http.createServer((_req, res) => {
    hits++;
    res.writeHead(302, { location: to }).end();
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  closers.push(() => new Promise<void>((r) => s.close(() => r())));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, hits: () => hits };
}

let n = 0;
const partial = () => path.join(dir, `p-${++n}`);

describe('hostClasses', () => {
  it('classifies literals, loopback names and resolved names; an unresolvable name is public', async () => {
    expect(await hostClasses('169.254.169.254', lookup)).toEqual(new Set(['link-local']));
    expect(await hostClasses('[::ffff:127.0.0.1]', lookup)).toEqual(new Set(['loopback']));
    expect(await hostClasses('[fd00::1]', lookup)).toEqual(new Set(['private']));
    expect(await hostClasses('100.64.0.1', lookup)).toEqual(new Set(['private']));
    expect(await hostClasses('0.0.0.0', lookup)).toEqual(new Set(['unspecified']));
    expect(await hostClasses('localhost', lookup)).toEqual(new Set(['loopback']));
    expect(await hostClasses('metadata.invalid', lookup)).toEqual(new Set(['link-local']));
    expect(await hostClasses('files.public.invalid', lookup)).toEqual(new Set(['public']));
    expect(await hostClasses('nowhere.invalid', lookup)).toEqual(new Set(['public']));
  });
});

describe('a model download that redirects (issue 27, finding 7)', () => {
  it.each([
    ['http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['http://metadata.invalid/computeMetadata/v1/', 'link-local'],
    ['http://10.1.2.3/admin', 'private'],
    ['http://lan.invalid/admin', 'private'],
    ['http://0.0.0.0:9/', 'unspecified'],
  ])('from a loopback catalog URL to %s is refused at once, before any request goes there', async (to, kind) => {
    const r = await redirector(to);
    const err = await download({ url: `${r.url}/m.gguf`, sha256: '0'.repeat(64), partial: partial(), client: got, retryDelayMs: 10, lookup }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(FetchRefused);
    expect((err as Error).message).toContain(`a ${kind} address the catalog does not name`);
    // Refused, not retried: one request, to the redirector.
    expect(r.hits()).toBe(1);
  });

  it('a catalog URL on a public name may not redirect to loopback or the LAN, an internal mirror may stay internal', async () => {
    const fromPublic = redirectGuard('https://files.public.invalid/m.gguf', lookup);
    for (const to of ['http://127.0.0.1:8081/agent/v1/files/x', 'http://localhost/', 'http://[::1]/', 'http://lan.invalid/'])
      await expect(fromPublic({ url: to })).rejects.toBeInstanceOf(RedirectRefused);
    await expect(fromPublic({ url: new URL('https://cdn.public.invalid/blob') })).resolves.toBeUndefined();
    const fromMirror = redirectGuard('http://lan.invalid/m.gguf', lookup);
    await expect(fromMirror({ url: 'http://10.9.9.9/blob' })).resolves.toBeUndefined();
    await expect(fromMirror({ url: 'http://169.254.169.254/' })).rejects.toThrow('a link-local address the catalog does not name');
  });

  it('a redirect within the kind of address the catalog names is followed (localhost to 127.0.0.1)', async () => {
    const body = randomBytes(1024);
    const target = await fileServer(body);
    closers.push(target.close);
    const r = await redirector(`${target.url}/cdn/m.gguf`);
    const p = partial();
    await download({ url: `${r.url.replace('127.0.0.1', 'localhost')}/m.gguf`, sha256: target.sha256, partial: p, client: got, retryDelayMs: 10, lookup });
    expect(fs.readFileSync(p).equals(body)).toBe(true);
  });
});
