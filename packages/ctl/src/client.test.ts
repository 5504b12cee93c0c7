import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { call, resolveConnection, sentNothing } from './client.js';
import { request } from './http.js';
import { CtlError } from './failure.js';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
let home: string;
const saved = { ...process.env };
beforeEach(() => {
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-ctl-'));
  process.env = { ...saved, LLMGW_HOME: home };
  delete process.env.LLMGW_CA;
  delete process.env.LLMGW_SERVER;
  delete process.env.LLMGW_ADMIN_TOKEN;
});
afterEach(() => {
  process.env = saved;
  fs.rmSync(home, { recursive: true, force: true });
});

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return e as CtlError;
  }
  throw new Error('no error');
};

describe('resolveConnection', () => {
  it("finds the local server's CA the way it finds the admin token, and --ca wins", () => {
    expect(resolveConnection({}).ca).toBeUndefined();
    fs.mkdirSync(path.join(home, 'server', 'tls'), { recursive: true });
    fs.writeFileSync(path.join(home, 'server', 'tls', 'ca.pem'), PEM);
    expect(resolveConnection({})).toMatchObject({ ca: PEM });
    expect(resolveConnection({}).servers.urls).toEqual(['https://127.0.0.1:8081']);
    const mine = path.join(home, 'mine.pem');
    fs.writeFileSync(mine, `${PEM}x`);
    expect(resolveConnection({ ca: mine }).ca).toBe(`${PEM}x`);
    process.env.LLMGW_CA = mine;
    expect(resolveConnection({}).ca).toBe(`${PEM}x`);
    expect(refusal(() => resolveConnection({ ca: path.join(home, 'none.pem') }))).toMatchObject({
      failure: 'usage',
      message: expect.stringMatching(/^cannot read --ca /) as unknown,
    });
  });

  it('refuses plain http to another machine unless --insecure-http, as a usage error', () => {
    const e = refusal(() => resolveConnection({ server: 'http://10.0.0.1:8081' }));
    expect(e).toBeInstanceOf(CtlError);
    expect(e).toMatchObject({ failure: 'usage', message: expect.stringContaining('--insecure-http') as unknown });
    expect(resolveConnection({ server: 'http://10.0.0.1:8081', insecureHttp: true }).servers.urls).toEqual(['http://10.0.0.1:8081']);
    expect(resolveConnection({ server: 'http://127.0.0.1:8081' }).ca).toBeUndefined();
  });

  it('says where the token came from: --token, or LLMGW_ADMIN_TOKEN (which commander also puts in opts.token)', () => {
    expect(resolveConnection({ token: 't' }, undefined, 'cli').tokenFrom).toBe('given by --token');
    expect(resolveConnection({ token: 't' }, undefined, 'env').tokenFrom).toBe('in LLMGW_ADMIN_TOKEN');
    // A token no header can carry is a usage error, not "cannot reach the server (ERR_INVALID_CHAR)".
    expect(refusal(() => resolveConnection({ token: 'llmgw-viewer-zJ34…' }, undefined, 'env'))).toMatchObject({
      failure: 'usage',
      message:
        'the admin token in LLMGW_ADMIN_TOKEN has a character an HTTP header cannot carry (a space, or a prefix cut short with …?): set --token or LLMGW_ADMIN_TOKEN to the whole token',
    });
  });
});

describe('misleading setups, each named with its fix', () => {
  it('a server address without its scheme is a usage error that shows the URL to use', () => {
    expect(refusal(() => resolveConnection({ server: 'localhost:8081' }, 'cli'))).toMatchObject({
      failure: 'usage',
      message: 'invalid --server "localhost:8081": a URL needs its scheme: https://localhost:8081',
    });
    process.env.LLMGW_SERVER = '127.0.0.1:8081';
    expect(refusal(() => resolveConnection({}, undefined))).toMatchObject({
      failure: 'usage',
      message: 'invalid LLMGW_SERVER "127.0.0.1:8081": a URL needs its scheme: https://127.0.0.1:8081',
    });
  });

  it('no token anywhere names the token file it looked for, before anything is sent', async () => {
    const conn = resolveConnection({ server: 'http://127.0.0.1:1' });
    await expect(call(conn, 'GET', '/nodes')).rejects.toMatchObject({
      failure: 'usage',
      message: `no admin token: no token file at ${path.join(home, 'server', 'admin-token')} (LLMGW_HOME=${home}); set LLMGW_HOME to the directory the server was started with, or --token / LLMGW_ADMIN_TOKEN`,
    });
  });

  describe('against a real HTTP server', () => {
    let answer: { status: number; body: string } = { status: 200, body: '{}' };
    const srv = http.createServer((_req, res) => res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body));
    let url = '';
    beforeEach(async () => {
      await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
      url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
    });
    afterEach(async () => {
      await new Promise((r) => srv.close(r));
    });

    it("the client listener's OpenAI-shaped 401 says it is the client address, not the admin API", async () => {
      answer = { status: 401, body: '{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}' };
      await expect(call(resolveConnection({ server: url, token: 't' }), 'GET', '/nodes')).rejects.toMatchObject({
        failure: 'failed',
        message: expect.stringMatching(new RegExp(`^${url} is llmgw's client \\(OpenAI-compatible\\) address, not its admin API: point --server`)) as unknown,
      });
    });

    it('a 401 names where the rejected token came from; an answer without our error body says so', async () => {
      answer = { status: 401, body: '{"error":"invalid admin token"}' };
      fs.mkdirSync(path.join(home, 'server'), { recursive: true });
      fs.writeFileSync(path.join(home, 'server', 'admin-token'), 'stale\n');
      await expect(call(resolveConnection({ server: url }), 'GET', '/nodes')).rejects.toThrow(
        `${url} rejected the admin token in ${path.join(home, 'server', 'admin-token')} (invalid admin token): set --token or LLMGW_ADMIN_TOKEN to the server's admin token`,
      );
      answer = { status: 404, body: '<html>not found</html>' };
      await expect(call(resolveConnection({ server: url, token: 't' }, 'cli'), 'GET', '/nodes?x=1')).rejects.toThrow(
        `${url} answered 404 to GET /api/v1/nodes without llmgw's error body: is it llmgw's admin address? (address set by --server)`,
      );
      answer = { status: 404, body: '{"error":"no replica \\"r-1\\""}' };
      await expect(call(resolveConnection({ server: url, token: 't' }), 'GET', '/replicas/r-1/logs')).rejects.toMatchObject({
        message: 'no replica "r-1"',
        status: 404,
      });
    });

    it("takes the failure from the answer's code, and from the status only without one", async () => {
      const conn = () => resolveConnection({ server: url, token: 't' }, 'cli');
      answer = { status: 404, body: '{"error":"no replica \\"r-1\\"","code":"not_found"}' };
      await expect(call(conn(), 'GET', '/replicas/r-1/logs')).rejects.toMatchObject({
        message: 'no replica "r-1"',
        failure: 'failed',
        status: 404,
        code: 'not_found',
      });
      // llmgw's own 503 is a refusal: the server answered.
      answer = { status: 503, body: '{"error":"store unavailable: ENOSPC","code":"store_unavailable"}' };
      await expect(call(conn(), 'POST', '/keys', {})).rejects.toMatchObject({ failure: 'failed', code: 'store_unavailable' });
      // A proxy's page: llmgw behind it did not answer.
      answer = { status: 502, body: '<html>Bad Gateway</html>' };
      await expect(call(conn(), 'GET', '/nodes')).rejects.toMatchObject({
        failure: 'unreachable',
        message: `${url} answered 502 to GET /api/v1/nodes without llmgw's error body: a proxy in front of a server that does not answer, or not llmgw's admin address? (address set by --server)`,
      });
      // A code that is not ours is no code.
      answer = { status: 503, body: '{"error":"busy","code":"no_such_code"}' };
      await expect(call(conn(), 'GET', '/nodes')).rejects.toMatchObject({ message: 'busy', failure: 'unreachable', code: undefined });
    });
  });
});

describe('sentNothing: when a write may go to another instance', () => {
  const failure = (url: string) =>
    request(url, { method: 'POST', json: { a: 1 }, requestTimeoutMs: 5000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
  const listen = async (srv: net.Server) => {
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    return (srv.address() as AddressInfo).port;
  };

  it('is true when the connection was refused, or cut before the TLS handshake ended', async () => {
    const cut = net.createServer((s) => s.destroy());
    const port = await listen(cut);
    try {
      const refused = net.createServer();
      const refusedPort = await listen(refused);
      await new Promise((r) => refused.close(r));
      expect(sentNothing(await failure(`http://127.0.0.1:${refusedPort}/x`))).toBe(true);
      // The peer went away during the handshake: no byte of the request can have been sent.
      expect(sentNothing(await failure(`https://127.0.0.1:${port}/x`))).toBe(true);
    } finally {
      cut.close();
    }
  });

  it('is false once the request went out: a connection cut after it, or a 503', async () => {
    const reset = http.createServer((req) => req.resume().on('end', () => req.socket.destroy()));
    const busy = http.createServer((req, res) => req.resume().on('end', () => res.writeHead(503).end('{"error":"busy"}')));
    try {
      const e1 = await failure(`http://127.0.0.1:${await listen(reset)}/x`);
      expect((e1 as { code?: string }).code).toBe('ECONNRESET');
      expect(sentNothing(e1)).toBe(false);
      expect(sentNothing(await failure(`http://127.0.0.1:${await listen(busy)}/x`))).toBe(false);
    } finally {
      reset.close();
      busy.close();
    }
  });
});
