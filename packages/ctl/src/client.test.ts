import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { resolveConnection } from './client.js';
import { CtlError } from './failure.js';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
let home: string;
const saved = { ...process.env };
beforeEach(() => {
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-ctl-'));
  process.env = { ...saved, LLMGW_HOME: home };
  delete process.env.LLMGW_CA;
  delete process.env.LLMGW_SERVER;
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
    expect(resolveConnection({})).toMatchObject({ server: 'https://127.0.0.1:8081', ca: PEM });
    const mine = path.join(home, 'mine.pem');
    fs.writeFileSync(mine, `${PEM}x`);
    expect(resolveConnection({ ca: mine }).ca).toBe(`${PEM}x`);
    process.env.LLMGW_CA = mine;
    expect(resolveConnection({}).ca).toBe(`${PEM}x`);
    expect(refusal(() => resolveConnection({ ca: path.join(home, 'none.pem') }))).toMatchObject({ failure: 'usage', message: expect.stringMatching(/^cannot read --ca /) as unknown });
  });

  it('refuses plain http to another machine unless --insecure-http, as a usage error', () => {
    const e = refusal(() => resolveConnection({ server: 'http://10.0.0.1:8081' }));
    expect(e).toBeInstanceOf(CtlError);
    expect(e).toMatchObject({ failure: 'usage', message: expect.stringContaining('--insecure-http') as unknown });
    expect(resolveConnection({ server: 'http://10.0.0.1:8081', insecureHttp: true }).server).toBe('http://10.0.0.1:8081');
    expect(resolveConnection({ server: 'http://127.0.0.1:8081' }).ca).toBeUndefined();
  });
});
