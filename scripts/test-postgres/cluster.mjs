// A throwaway PostgreSQL cluster for tests and benchmarks: initdb into a temporary
// directory, one postmaster on a free 127.0.0.1 port (and a Unix socket in the same
// directory), removed again by `stop`. Debian's `postgresql` package provides the
// binaries (scripts/bootstrap.sh installs it); as root, initdb and postgres must run as
// the `postgres` user, which is what `runuser` is for here.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** Where initdb and postgres are: PG_BINDIR, pg_config's bindir, or the newest /usr/lib/postgresql/N/bin. */
export function postgresBinDir() {
  const candidates = [];
  if (process.env.PG_BINDIR) candidates.push(process.env.PG_BINDIR);
  try {
    candidates.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  } catch {
    // No pg_config on PATH: look where Debian puts the server.
  }
  const debian = '/usr/lib/postgresql';
  if (fs.existsSync(debian)) {
    for (const v of fs.readdirSync(debian).sort((a, b) => Number(b) - Number(a))) candidates.push(path.join(debian, v, 'bin'));
  }
  return candidates.find((d) => fs.existsSync(path.join(d, 'initdb')) && fs.existsSync(path.join(d, 'postgres')));
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Runs a PostgreSQL binary as the current user, or as `postgres` when this is root. */
function asPostgres(bin, args) {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
}

/**
 * Starts a cluster and resolves once it accepts connections. `settings` are extra
 * `-c name=value` server settings (tests turn fsync off; benchmarks keep the defaults).
 * Resolves `{ url, dir, port, stop }`: `url` reaches the `postgres` database as the
 * superuser `llmgw` (trust authentication, local only).
 */
export async function startPostgres({ settings = {}, log = () => {} } = {}) {
  const bindir = postgresBinDir();
  if (!bindir) throw new Error('PostgreSQL is not installed (no initdb/postgres found): run ./scripts/bootstrap.sh, or apt-get install postgresql');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-pg-'));
  fs.chmodSync(dir, 0o755);
  const data = path.join(dir, 'data');
  fs.mkdirSync(data, { mode: 0o700 });
  if (process.getuid?.() === 0) execFileSync('chown', ['-R', 'postgres:', dir]);
  const [initBin, initArgs] = asPostgres(path.join(bindir, 'initdb'), [
    '-D',
    data,
    '-U',
    'llmgw',
    '--auth=trust',
    '--encoding=UTF8',
    '--no-locale',
    '--no-sync',
  ]);
  try {
    execFileSync(initBin, initArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${String(err.stderr ?? err.message).trim()}`);
  }
  const port = await freePort();
  const conf = { listen_addresses: '127.0.0.1', port: String(port), unix_socket_directories: dir, max_connections: '200', ...settings };
  const [pgBin, pgArgs] = asPostgres(path.join(bindir, 'postgres'), ['-D', data, ...Object.entries(conf).flatMap(([k, v]) => ['-c', `${k}=${v}`])]);
  const child = spawn(pgBin, pgArgs, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr = (stderr + d).slice(-4000);
    log(String(d));
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = `postgres://llmgw@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) {
      fs.rmSync(dir, { recursive: true, force: true });
      throw new Error(`postgres exited at start (${child.exitCode}): ${stderr.trim()}`);
    }
    if (accepts(bindir, port)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
      throw new Error(`postgres did not accept connections within 30 s: ${stderr.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.stderr.unref?.();
  child.unref();
  let stopped;
  return {
    url,
    dir,
    port,
    pid: child.pid,
    /** Stops the postmaster (fast shutdown, then SIGKILL after 10 s) and removes the cluster. */
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null) {
          // The postmaster itself, not runuser in front of it: SIGINT is its fast shutdown.
          const postmaster = postmasterPid(data) ?? child.pid;
          signal(postmaster, 'SIGINT');
          const timer = setTimeout(() => signal(-child.pid, 'SIGKILL'), 10_000);
          await exited;
          clearTimeout(timer);
        }
        fs.rmSync(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

/** Whether the server takes connections yet (pg_isready exits 0 only once recovery is over). */
function accepts(bindir, port) {
  try {
    execFileSync(path.join(bindir, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port), '-t', '1'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function postmasterPid(data) {
  try {
    const pid = Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n', 1)[0]);
    return pid > 1 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function signal(pid, sig) {
  try {
    process.kill(pid, sig);
  } catch {
    // Already gone.
  }
}
