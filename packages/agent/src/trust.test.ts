import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import { caFingerprint, fullJoinToken } from '@llmgw/shared';
import { Agent } from './agent.js';
import { checkServerUrl, establishTrust } from './trust.js';

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test/fixtures/tls');
const read = (f: string) => fs.readFileSync(path.join(dir, f), 'utf8');
const CA = read('ca.pem');
const OTHER = read('other-ca.pem');
const log = pino({ level: 'silent' });

/** A real HTTPS server with the fixture certificate: `/cacerts` and a heartbeat that records its bearer. */
let server: https.Server;
let url: string;
let cacerts = CA;
const bearers: string[] = [];
beforeAll(async () => {
  server = https.createServer({ cert: read('server.pem'), key: read('server-key.pem') }, (req, res) => {
    if (req.url === '/cacerts') return void res.end(cacerts);
    bearers.push(req.headers.authorization ?? '');
    res.setHeader('content-type', 'application/json');
    res.end(req.url?.includes('/assignments') ? '{"version":1,"assignments":[]}' : '{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.close();
});

const changeOneDigit = (token: string) => token.replace(/^K10(.)/, (_m, d: string) => `K10${d === '0' ? '1' : '0'}`);

describe('establishTrust', () => {
  it('checks a full token against /cacerts and then trusts that CA alone', async () => {
    const t = await establishTrust({ server: url, joinToken: fullJoinToken('s3cret', CA), insecureHttp: false }, log);
    expect(t.secret).toBe('s3cret');
    expect(caFingerprint(t.ca!)).toBe(caFingerprint(CA));
  });

  it('refuses a token whose pin differs by one digit, naming both fingerprints', async () => {
    const bad = changeOneDigit(fullJoinToken('s3cret', CA));
    const err = await establishTrust({ server: url, joinToken: bad, insecureHttp: false }, log).catch((e: Error) => e);
    expect((err as Error).message).toContain(`has SHA-256 ${caFingerprint(CA)}, but the join token pins ${bad.slice(3, 67)}`);
  });

  it('refuses a server that serves another CA than the pinned one', async () => {
    cacerts = OTHER;
    try {
      await expect(establishTrust({ server: url, joinToken: fullJoinToken('s', CA), insecureHttp: false }, log)).rejects.toThrow(
        `has SHA-256 ${caFingerprint(OTHER)}`,
      );
    } finally {
      cacerts = CA;
    }
  });

  it('trusts only the pinned certificate when /cacerts sends more', async () => {
    cacerts = `${CA}\n${OTHER}`;
    try {
      const t = await establishTrust({ server: url, joinToken: fullJoinToken('s', CA), insecureHttp: false }, log);
      expect(t.ca).not.toContain(OTHER.trim().split('\n')[1]);
    } finally {
      cacerts = CA;
    }
  });

  it('says a token whose pin is cut short is malformed, not "only the secret" (issue 30)', async () => {
    const cut = fullJoinToken('s3cret', CA).replace(/^(K10[0-9a-f]{20})[0-9a-f]+/, '$1');
    const err = establishTrust({ server: url, joinToken: cut, insecureHttp: false }, log);
    await expect(err).rejects.toThrow('the join token is malformed: its CA pin (after K10, before ::) has 20 hex digits, not 64');
    await expect(establishTrust({ server: url, joinToken: cut, caFile: path.join(dir, 'ca.pem'), insecureHttp: false }, log)).rejects.toThrow(/malformed/);
  });

  it('needs --ca for a bare secret, and never trusts the server without one', async () => {
    await expect(establishTrust({ server: url, joinToken: 's3cret', insecureHttp: false }, log)).rejects.toThrow(/only the secret.*--ca FILE/);
    const t = await establishTrust({ server: url, joinToken: 's3cret', caFile: path.join(dir, 'ca.pem'), insecureHttp: false }, log);
    expect(t).toEqual({ secret: 's3cret', ca: CA });
  });

  it('checks --ca against the pin of a full token', async () => {
    await expect(
      establishTrust({ server: url, joinToken: fullJoinToken('s', CA), caFile: path.join(dir, 'other-ca.pem'), insecureHttp: false }, log),
    ).rejects.toThrow(`(--ca ${path.join(dir, 'other-ca.pem')}) has SHA-256 ${caFingerprint(OTHER)}`);
  });
});

describe('checkServerUrl', () => {
  it('refuses plain http to another machine unless --insecure-http', () => {
    expect(() => checkServerUrl('http://10.0.0.1:8081', false)).toThrow(/refusing plain http to 10.0.0.1:8081/);
    expect(checkServerUrl('http://10.0.0.1:8081', true).host).toBe('10.0.0.1:8081');
    for (const local of ['http://127.0.0.1:8081', 'http://localhost:8081', 'http://[::1]:8081']) expect(() => checkServerUrl(local, false)).not.toThrow();
    // A name is not an address (issue 27): this one resolves wherever its owner likes.
    expect(() => checkServerUrl('http://127.attacker.invalid:8081', false)).toThrow(/refusing plain http to 127.attacker.invalid:8081/);
  });
});

describe('Agent over TLS', () => {
  const join = async (ca: string) => {
    const before = bearers.length;
    const a = new Agent(
      { server: url, joinToken: 's3cret', ca, nodeId: 'n1', labels: {}, advertiseAddr: '127.0.0.1', heartbeatIntervalMs: 100, probeIntervalMs: 10_000 },
      () => Promise.resolve({ memoryTotalMb: 1, cpuCores: 1, gpus: [], fabrics: [], warnings: [] }),
      { converge: () => {}, statuses: () => [], onChange: () => {} },
      log,
    );
    void a.start();
    await new Promise((r) => setTimeout(r, 400));
    a.stop();
    const sent = bearers.slice(before);
    // Let a request the stop aborted settle, so it is not counted for the next agent.
    await new Promise((r) => setTimeout(r, 200));
    return sent;
  };

  it('sends the secret to a server whose certificate the CA signed', async () => {
    expect(await join(CA)).toContain('Bearer s3cret');
  });

  it('sends nothing to a server the CA did not sign', async () => {
    expect(await join(OTHER)).toEqual([]);
  });
});
