import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import { caFingerprint } from '@llmgw/shared';
import { createCa, issueServerCert, reissueReason, san, sansOf } from './certs.js';
import { adminTls, wantedSans } from './index.js';
import { tempDirs } from '../../test/temp-dirs.js';

const log = pino({ level: 'silent' });
const tmp = tempDirs('llmgw-tls-', afterAll);
const mode = (f: string) => fs.statSync(f).mode & 0o777;

/** Whether a TLS client that trusts `ca` alone accepts `pair` as `host`: 'ok' or the error code. */
async function accepted(pair: { cert: string; key: string }, ca: string, host = '127.0.0.1'): Promise<string> {
  const server = https.createServer(pair, (_req, res) => res.end('ok'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    return await new Promise((resolve) => {
      const port = (server.address() as AddressInfo).port;
      const s = tls.connect({ host: '127.0.0.1', port, ca, ...(host === '127.0.0.1' ? {} : { servername: host }) }, () => {
        s.end();
        resolve('ok');
      });
      s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    });
  } finally {
    server.close();
  }
}

describe('adminTls', () => {
  it('makes a CA and a server certificate on first start, keys 0600, that a client trusting the CA alone accepts', async () => {
    const dataDir = tmp();
    const made = await adminTls({ dataDir, listenHost: '127.0.0.1', extraSans: [] }, log);
    expect(made.caFile).toBe(path.join(dataDir, 'tls', 'ca.pem'));
    expect(fs.readFileSync(made.caFile, 'utf8')).toBe(made.caPem);
    expect(mode(path.join(dataDir, 'tls'))).toBe(0o700);
    expect(mode(path.join(dataDir, 'tls', 'ca-key.pem'))).toBe(0o600);
    expect(mode(path.join(dataDir, 'tls', 'server-key.pem'))).toBe(0o600);
    expect(new X509Certificate(made.caPem).ca).toBe(true);
    expect(new X509Certificate(made.cert).publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(await accepted(made, made.caPem)).toBe('ok');
    const stranger = await createCa('someone else');
    expect(await accepted(made, stranger.cert)).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
  });

  it('keeps the CA and certificate across restarts, and reissues from the same CA for a new --tls-san', async () => {
    const dataDir = tmp();
    const first = await adminTls({ dataDir, listenHost: '127.0.0.1', extraSans: [] }, log);
    const again = await adminTls({ dataDir, listenHost: '127.0.0.1', extraSans: [] }, log);
    expect(again.cert).toBe(first.cert);
    const wider = await adminTls({ dataDir, listenHost: '127.0.0.1', extraSans: ['gw.example.com', '203.0.113.7'] }, log);
    expect(wider.caPem).toBe(first.caPem);
    expect(wider.cert).not.toBe(first.cert);
    expect(sansOf(wider.cert)).toEqual(expect.arrayContaining([san('gw.example.com'), san('203.0.113.7')]));
    expect(await accepted(wider, first.caPem, 'gw.example.com')).toBe('ok');
    expect(await accepted(first, first.caPem, 'gw.example.com')).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
  });

  it('uses the operator certificate as given, pinning the last certificate of its file', async () => {
    const ca = await createCa('operator CA');
    const leaf = await issueServerCert(ca, [san('127.0.0.1')]);
    const d = tmp();
    fs.writeFileSync(path.join(d, 'chain.pem'), `${leaf.cert}\n${ca.cert}`);
    fs.writeFileSync(path.join(d, 'key.pem'), leaf.key);
    const made = await adminTls({ dataDir: d, listenHost: '', extraSans: [], certFile: path.join(d, 'chain.pem'), keyFile: path.join(d, 'key.pem') }, log);
    expect(caFingerprint(made.caPem)).toBe(caFingerprint(ca.cert));
    expect(fs.existsSync(path.join(d, 'tls'))).toBe(false);
    fs.writeFileSync(path.join(d, 'key.pem'), (await createCa('x')).key);
    await expect(
      adminTls({ dataDir: d, listenHost: '', extraSans: [], certFile: path.join(d, 'chain.pem'), keyFile: path.join(d, 'key.pem') }, log),
    ).rejects.toThrow(/invalid --tls-cert\/--tls-key: .*key.pem is not the key of/);
  });
});

describe('reissueReason', () => {
  it('names what is wrong with a kept certificate', async () => {
    const ca = await createCa('a');
    const cert = await issueServerCert(ca, [san('127.0.0.1')]);
    expect(reissueReason(cert, ca, [san('127.0.0.1')])).toBeUndefined();
    expect(reissueReason(cert, ca, [san('127.0.0.1'), san('10.0.0.5')])).toBe('it does not name 10.0.0.5');
    expect(reissueReason(cert, await createCa('b'), [])).toBe('it was not signed by this CA');
    expect(reissueReason(cert, ca, [], Date.now() + 820 * 86_400_000)).toMatch(/^it ends on /);
  });
});

describe('wantedSans', () => {
  it('names loopback, the hostname, every address and --tls-san, once each', () => {
    const ifaces = {
      eth0: [
        { address: '10.0.0.5', family: 'IPv4' },
        { address: 'FE80::0001', family: 'IPv6' },
      ],
    } as unknown as ReturnType<typeof os.networkInterfaces>;
    const sans = wantedSans('0.0.0.0', ['gw.example.com', '10.0.0.5'], 'box1', ifaces).map((s) => s.value);
    expect(sans).toEqual(['127.0.0.1', '::1', 'localhost', 'box1', '10.0.0.5', 'fe80::1', 'gw.example.com']);
    expect(wantedSans('192.0.2.1', [], 'box1', {}).map((s) => s.value)).toContain('192.0.2.1');
  });
});
