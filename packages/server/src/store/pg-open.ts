import { StoreOpenError } from './open.js';

/**
 * Where a database URL points, for messages: `user@host:port/database`, never the
 * password. Throws a `StoreOpenError` for a string that is not a PostgreSQL URL.
 */
export function describeUrl(url: string): { where: string; password?: string } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new StoreOpenError('--database-url is not a URL: give postgres://user:password@host:port/database');
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new StoreOpenError(`--database-url has scheme ${u.protocol.replace(/:$/, '')}, not postgres: give postgres://user:password@host:port/database`);
  }
  // A Unix socket is given as ?host=/path, as libpq and pg accept it.
  const host = u.searchParams.get('host') ?? (decodeURIComponent(u.hostname) || 'localhost');
  const db = decodeURIComponent(u.pathname.replace(/^\//, '')) || decodeURIComponent(u.username) || 'postgres';
  const user = u.username ? `${decodeURIComponent(u.username)}@` : '';
  return { where: `${user}${host}:${u.port || '5432'}/${db}`, ...(u.password ? { password: decodeURIComponent(u.password) } : {}) };
}

/**
 * Why a connection at start failed, as the one line the operator reads: where, what the
 * server or the network said, and what to check. The password is never in it, even if
 * a driver's message were to repeat it.
 */
export function connectError(err: unknown, where: string, password?: string): StoreOpenError {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : undefined;
  let said = (typeof e.message === 'string' ? e.message : String(err)).split('\n', 1)[0]!.slice(0, 200);
  if (password) said = said.split(password).join('***');
  const detail = code && !said.includes(code) ? `${said}, ${code}` : said;
  if (code === '28P01' || code === '28000') {
    return new StoreOpenError(
      `PostgreSQL at ${where} refused the login (${detail}): check the user and password in --database-url (LLMGW_DATABASE_URL) and pg_hba.conf`,
    );
  }
  if (code === '3D000') {
    return new StoreOpenError(
      `PostgreSQL at ${where} has no such database (${detail}): create it (an empty database for llmgw), or fix the name in --database-url`,
    );
  }
  return new StoreOpenError(
    `cannot reach PostgreSQL at ${where} (${detail}): check that the server runs and listens on that host and port, that this machine may connect (firewall, pg_hba.conf), and the URL in --database-url (LLMGW_DATABASE_URL)`,
  );
}
