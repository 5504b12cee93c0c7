import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { pino, type Logger } from 'pino';
import { parseJoinToken, pinMatches } from '@llmgw/shared';
import { tokenFor } from '../store/modes.js';
import { adminTls } from '../tls/index.js';
import { prepareJoinToken } from '../credentials/join-token.js';
import { describePostgres, freshDatabase } from '../../test/postgres.js';
import { tempDirs } from '../../test/temp-dirs.js';
import { PostgresStore } from '../store/postgres.js';
import { shareSecrets } from './secrets.js';

/** The built server, run as an operator runs it (`pnpm test` builds first). */
const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

/** Starts `llmgw-server --database-url` on its own data directory, resolves once it listens, then stops it. */
function startAndStop(dataDir: string, databaseUrl: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env };
    for (const v of ['LLMGW_ADMIN_TOKEN', 'LLMGW_JOIN_TOKEN', 'LLMGW_DATABASE_URL']) delete env[v];
    const child = spawn(
      process.execPath,
      [MAIN, '--data-dir', dataDir, '--database-url', databaseUrl, '--client-addr', '127.0.0.1:0', '--admin-addr', '127.0.0.1:0'],
      { env },
    );
    let out = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('llmgw-server listening')) child.kill('SIGTERM');
    });
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.on('error', reject);
    child.on('exit', () => {
      clearTimeout(timer);
      if (out.includes('llmgw-server listening')) resolve(out);
      else reject(new Error(`llmgw-server did not start:\n${out}`));
    });
  });
}

const tmp = tempDirs('llmgw-shared-secrets-', afterAll);
const read = (dir: string, file: string) => fs.readFileSync(path.join(dir, file), 'utf8');
const mode = (dir: string, file: string) => fs.statSync(path.join(dir, file)).mode & 0o777;

/** A logger whose lines the test reads. */
function capture(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: pino({ level: 'info' }, { write: (s: string) => void lines.push(s) }), lines };
}

/** What main.ts does at start after shareSecrets: every secret read from the data directory, as with SQLite. */
async function start(dataDir: string, san: string) {
  const log = pino({ level: 'silent' });
  const admin = tokenFor(undefined, dataDir, 'admin-token').token;
  const tls = await adminTls({ dataDir, listenHost: '127.0.0.1', extraSans: [san] }, log);
  const join = prepareJoinToken(undefined, dataDir, tls.caPem);
  const engine = tokenFor(undefined, dataDir, 'engine-key-secret').token;
  return { admin, tls, join: read(dataDir, 'join-token').trim(), joinSecret: join.secret, engine };
}

function chainsTo(certPem: string, caPem: string): boolean {
  const cert = new X509Certificate(certPem);
  const ca = new X509Certificate(caPem);
  return cert.checkIssued(ca) && cert.verify(ca.publicKey);
}

describePostgres('shared secrets on PostgreSQL', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  // One store per instance, as two llmgw-server processes would each open.
  let secrets: PostgresStore;
  let other: PostgresStore;
  const row = async (name: string) => (await secrets.pool.query<{ value: string }>('SELECT value FROM secrets WHERE name = $1', [name])).rows[0]?.value;

  beforeAll(async () => {
    db = await freshDatabase();
    [secrets, other] = await Promise.all([PostgresStore.open(db.url), PostgresStore.open(db.url)]);
  });
  afterAll(async () => {
    await secrets.close();
    await other.close();
    await db.drop();
  });
  const clear = () => secrets.pool.query('DELETE FROM secrets');

  it('two new instances starting at once end with the same tokens and CA, each with its own certificate from it', async () => {
    await clear();
    const [a, b] = [tmp(), tmp()];
    await Promise.all([shareSecrets(secrets, a, capture().log), shareSecrets(other, b, capture().log)]);
    const [sa, sb] = [await start(a, 'a.example'), await start(b, 'b.example')];
    for (const f of ['admin-token', 'join-token', 'engine-key-secret', 'tls/ca.pem', 'tls/ca-key.pem']) expect([f, read(a, f)]).toEqual([f, read(b, f)]);
    for (const f of ['admin-token', 'join-token', 'engine-key-secret', 'tls/ca-key.pem']) expect([f, mode(a, f), mode(b, f)]).toEqual([f, 0o600, 0o600]);
    expect(sa.admin).toBe(sb.admin);
    expect(sa.engine).toBe(sb.engine);
    expect(sa.joinSecret).toBe(sb.joinSecret);
    // An agent's pin from either instance's join token holds for the other's listener.
    expect(pinMatches(parseJoinToken(sa.join).caHash!, sb.tls.caPem)).toBe(true);
    expect(sa.tls.cert).not.toBe(sb.tls.cert);
    expect(chainsTo(sa.tls.cert, sb.tls.caPem) && chainsTo(sb.tls.cert, sa.tls.caPem)).toBe(true);
    expect(new X509Certificate(sa.tls.cert).subjectAltName).toContain('DNS:a.example');
    expect(new X509Certificate(sb.tls.cert).subjectAltName).toContain('DNS:b.example');
    expect(await row('admin-token')).toBe(sa.admin);
    expect(await row('join-token')).toBe(sa.joinSecret);
  });

  it('an upgraded single-server install that starts first keeps its tokens and CA, and the next instance takes them', async () => {
    await clear();
    const [old, next] = [tmp(), tmp()];
    const before = await start(old, 'old.example');
    const { log, lines } = capture();
    await shareSecrets(secrets, old, log);
    expect(lines.filter((l) => l.includes('"level":40'))).toEqual([]);
    const after = await start(old, 'old.example');
    expect(after).toEqual(before);
    await shareSecrets(other, next, capture().log);
    const took = await start(next, 'next.example');
    expect([took.admin, took.engine, took.joinSecret, took.tls.caPem]).toEqual([before.admin, before.engine, before.joinSecret, before.tls.caPem]);
    expect(took.join).toBe(before.join);
  });

  it('an instance whose files differ from the shared ones takes the shared ones, with a warning naming each file but no secret', async () => {
    await clear();
    const [first, otherDir] = [tmp(), tmp()];
    await shareSecrets(secrets, first, capture().log);
    const shared = await start(first, 'first.example');
    const own = await start(otherDir, 'other.example');
    const { log, lines } = capture();
    await shareSecrets(other, otherDir, log);
    const now = await start(otherDir, 'other.example');
    expect([now.admin, now.engine, now.joinSecret, now.tls.caPem]).toEqual([shared.admin, shared.engine, shared.joinSecret, shared.tls.caPem]);
    expect(now.join).toBe(shared.join);
    // Its listener certificate was reissued from the shared CA, still for its own names.
    expect(now.tls.cert).not.toBe(own.tls.cert);
    expect(chainsTo(now.tls.cert, shared.tls.caPem)).toBe(true);
    expect(new X509Certificate(now.tls.cert).subjectAltName).toContain('DNS:other.example');
    const warned = lines.map((l) => JSON.parse(l) as { level: number; file?: string; msg: string }).filter((l) => l.level === 40);
    expect(warned.map((w) => w.file)).toEqual(['admin-token', 'join-token', 'engine-key-secret', 'tls/ca.pem'].map((f) => path.join(otherDir, f)));
    const text = lines.join('');
    for (const secret of [own.admin, own.engine, own.joinSecret, shared.admin, shared.engine, shared.joinSecret]) expect(text.includes(secret)).toBe(false);
  });

  it('a token from the environment is neither shared nor written, and without the generated CA none is made', async () => {
    await clear();
    const dir = tmp();
    await shareSecrets(secrets, dir, capture().log, { env: { LLMGW_ADMIN_TOKEN: 'from-env', LLMGW_JOIN_TOKEN: 'from-env-too' }, ca: false });
    expect(fs.readdirSync(dir)).toEqual(['engine-key-secret']);
    expect([await row('admin-token'), await row('join-token'), await row('tls/ca')]).toEqual([undefined, undefined, undefined]);
  });

  it('two llmgw-server processes on one database write the same secrets into their data directories', async () => {
    await clear();
    const [a, b] = [tmp(), tmp()];
    await Promise.all([startAndStop(a, db.url), startAndStop(b, db.url)]);
    for (const f of ['admin-token', 'join-token', 'engine-key-secret', 'tls/ca.pem']) expect([f, read(a, f)]).toEqual([f, read(b, f)]);
    expect(read(a, 'tls/server.pem')).not.toBe(read(b, 'tls/server.pem'));
    expect(await row('admin-token')).toBe(read(a, 'admin-token').trim());
  });

  it('a data directory with half a CA is refused, not given a new one', async () => {
    await clear();
    const dir = tmp();
    await start(dir, 'x.example');
    fs.rmSync(path.join(dir, 'tls', 'ca-key.pem'));
    await expect(shareSecrets(secrets, dir, capture().log)).rejects.toThrow(/has only one of ca.pem and ca-key.pem/);
  });
});
