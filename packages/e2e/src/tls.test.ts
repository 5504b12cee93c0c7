import { execFile } from 'node:child_process';
import { X509Certificate, createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { NodeView } from '@llmgw/shared';
import { bins, cleanup, ctl, ctlJson, eventually, freePort, removeTmp, startAgent, startServer, tmpDir } from './harness.js';

/**
 * Journey (issue 12, "TLS pinned by the join token"): an operator starts a fresh server
 * and finds its admin API on HTTPS only, with the CA in <data-dir>/tls/ca.pem for curl
 * and ctl. An agent given the printed join token joins with no other setup; the same
 * token with one digit of its pin changed is refused in one line naming both
 * fingerprints, before anything is sent. A machine that reaches the server by a name the
 * certificate lacks is told to use --tls-san, and after a restart with it joins with the
 * same token: the CA, and so the pin, did not change.
 */

afterAll(async () => {
  await cleanup();
  removeTmp();
});

interface Out {
  code: number;
  stdout: string;
  stderr: string;
}

function exec(cmd: string, args: string[], env: Record<string, string> = {}): Promise<Out> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

const mode = (f: string) => fs.statSync(f).mode & 0o777;
const ready = (url: string, id: string) => async () => (await ctlJson<NodeView[]>(url, ['nodes'])).find((n) => n.id === id && n.liveness === 'ready');

describe('TLS pinned by the join token', () => {
  it('serves the admin API on HTTPS only, joins an agent with the full token alone, and refuses a changed pin', async () => {
    const server = await startServer();
    const tlsDir = path.join(server.dataDir, 'tls');
    const caFile = path.join(tlsDir, 'ca.pem');
    expect(server.adminUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);

    // curl trusts the CA file and nothing else; plain http gets no answer.
    const ok = await exec('curl', ['-sS', '--cacert', caFile, `${server.adminUrl}/healthz`]);
    expect(ok).toMatchObject({ code: 0, stdout: '{"status":"ok"}' });
    expect((await exec('curl', ['-sS', `${server.adminUrl}/healthz`])).code).toBe(60);
    expect((await exec('curl', ['-sS', `${server.adminUrl.replace('https:', 'http:')}/healthz`])).code).not.toBe(0);
    expect(mode(path.join(tlsDir, 'ca-key.pem'))).toBe(0o600);
    expect(mode(path.join(tlsDir, 'server-key.pem'))).toBe(0o600);
    expect(mode(path.join(server.dataDir, 'join-token'))).toBe(0o600);

    // The printed token pins the SHA-256 of the CA's DER, the fingerprint openssl shows.
    const printed = await exec(process.execPath, [bins.server, 'join-token', '--data-dir', server.dataDir]);
    expect(printed.code).toBe(0);
    const token = printed.stdout.trim();
    const pin = createHash('sha256')
      .update(new X509Certificate(fs.readFileSync(caFile)).raw)
      .digest('hex');
    expect(token).toBe(`K10${pin}::test-join-token`);
    expect(token).toBe(server.joinToken);

    // The full token and the address: nothing else.
    const agent = startAgent({ server: server.adminUrl, nodeId: 'pinned', token });
    await eventually(ready(server.adminUrl, 'pinned'), 20_000, 'the pinned agent joined');
    expect(agent.output()).toContain("the server's CA matches the join token's pin");

    // One digit of the pin changed: one line with both fingerprints, exit non-zero, nothing joined.
    const bad = `K10${pin[0] === '0' ? '1' : '0'}${pin.slice(1)}::test-join-token`;
    const refused = startAgent({ server: server.adminUrl, nodeId: 'impostor', token: bad });
    await new Promise<void>((r) => (refused.child.exitCode !== null ? r() : refused.child.once('exit', () => r())));
    expect(refused.child.exitCode).not.toBe(0);
    const lines = refused.output().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`has SHA-256 ${pin}, but the join token pins ${bad.slice(3, 67)}`);
    expect((await ctlJson<NodeView[]>(server.adminUrl, ['nodes'])).map((n) => n.id)).toEqual(['pinned']);

    // A bare secret needs --ca; plain http to another machine is refused by agent and ctl alike.
    const bare = startAgent({ server: server.adminUrl, nodeId: 'bare', token: 'test-join-token' });
    await bare.waitFor(/only the secret.*--ca FILE/);
    const far = startAgent({ server: 'http://192.0.2.99:8081', nodeId: 'far', token });
    await far.waitFor(/refusing plain http to 192\.0\.2\.99:8081/);
    const farCtl = await ctl('http://192.0.2.99:8081', ['nodes']);
    expect(farCtl.code).toBe(2);
    expect(farCtl.stderr).toMatch(/^error: refusing plain http to 192\.0\.2\.99:8081.*--insecure-http/);
  });

  it('tells a machine on an address the certificate lacks to use --tls-san, and keeps the pin when it is added', async () => {
    const port = await freePort();
    const dataDir = tmpDir('llmgw-server-');
    // Every address of this machine: 127.0.0.2 reaches it, but is not one of its addresses.
    const server = await startServer({ dataDir, adminAddr: `0.0.0.0:${port}` });
    const other = `https://127.0.0.2:${port}`;
    const before = await ctl(other, ['nodes'], { LLMGW_CA: server.caFile! });
    expect(before.code).toBe(1);
    expect(before.stderr).toBe(
      `error: the certificate of https://127.0.0.2:${port} does not name 127.0.0.2: restart llmgw-server with --tls-san 127.0.0.2, or use an address the certificate names\n`,
    );

    await server.stop();
    const again = await startServer({ dataDir, adminAddr: `0.0.0.0:${port}`, args: ['--tls-san', '127.0.0.2'] });
    expect(again.joinToken).toBe(server.joinToken);
    expect(again.output()).toContain('issued the server certificate because it does not name 127.0.0.2');
    startAgent({ server: other, nodeId: 'elsewhere', token: again.joinToken });
    await eventually(ready(again.adminUrl, 'elsewhere'), 20_000, 'the agent on the other address joined');
    expect((await ctl(other, ['nodes'], { LLMGW_CA: again.caFile! })).code).toBe(0);
  });

  it('serves plain HTTP only when asked with --insecure-http, and says so in the log and on the dashboard', async () => {
    const server = await startServer({ args: ['--insecure-http'] });
    expect(server.adminUrl).toMatch(/^http:\/\//);
    expect(server.output()).toContain('--insecure-http: the admin listener serves plain HTTP');
    const login = await exec('curl', ['-sS', `${server.adminUrl}/login`]);
    expect(login.stdout).toContain('This server runs with --insecure-http');
    // Nothing to pin: the file holds the bare secret, and loopback http needs no flag.
    expect(server.joinToken).toBe('test-join-token');
    startAgent({ server: server.adminUrl, nodeId: 'plain' });
    await eventually(ready(server.adminUrl, 'plain'), 20_000, 'the agent joined over loopback http');
  });
});
