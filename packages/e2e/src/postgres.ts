import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe } from '@jest/globals';

/**
 * The run's throwaway PostgreSQL (scripts/test-postgres/global-setup.mjs), for journeys
 * that run several server instances on one database. Databases are made with `psql`
 * from the same installation that started the cluster, so the journeys need no driver
 * of their own: they talk to PostgreSQL only as an operator would.
 */
const URL = process.env.LLMGW_TEST_POSTGRES_URL;
const MISSING = process.env.LLMGW_TEST_POSTGRES_MISSING;

// Outside CI a machine without PostgreSQL skips these journeys, loudly; in CI they run
// and fail, or the high-availability journeys would go untested without anyone noticing.
const runPostgres = URL !== undefined || Boolean(process.env.CI);
if (!runPostgres) {
  console.log(`PostgreSQL journeys SKIPPED: ${MISSING ?? 'LLMGW_TEST_POSTGRES_URL is not set'} (run ./scripts/bootstrap.sh, or apt-get install postgresql)`);
}

/** `describe` for journeys that need PostgreSQL: skipped, with the reason, only outside CI. */
export const describePostgres: typeof describe = runPostgres ? describe : (describe.skip as typeof describe);

/** psql beside the initdb that started the cluster (cluster.mjs looks in the same places). */
function psqlBin(): string {
  const dirs = process.env.PG_BINDIR ? [process.env.PG_BINDIR] : [];
  const debian = '/usr/lib/postgresql';
  if (fs.existsSync(debian)) {
    for (const v of fs.readdirSync(debian).sort((a, b) => Number(b) - Number(a))) dirs.push(path.join(debian, v, 'bin'));
  }
  return dirs.map((d) => path.join(d, 'psql')).find((f) => fs.existsSync(f)) ?? 'psql';
}

/** Runs one SQL statement as the cluster's superuser, in its `postgres` database. */
function psql(sql: string): Promise<void> {
  if (!URL)
    return Promise.reject(new Error(`no PostgreSQL for this test run: ${MISSING ?? 'LLMGW_TEST_POSTGRES_URL is not set'} (run ./scripts/bootstrap.sh)`));
  return new Promise((resolve, reject) => {
    execFile(psqlBin(), ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', URL, '-c', sql], (err, _stdout, stderr) =>
      err ? reject(new Error(`psql ${sql}: ${stderr.trim() || err.message}`)) : resolve(),
    );
  });
}

const made: string[] = [];

/** A new, empty database in the run's cluster, as a `--database-url` for server instances. */
export async function freshDatabase(): Promise<string> {
  const name = `e2e_${randomBytes(6).toString('hex')}`;
  await psql(`CREATE DATABASE ${name}`);
  made.push(name);
  return URL!.replace(/\/postgres$/, `/${name}`);
}

/** Drops the databases this file made (after its servers are gone: FORCE ends leftover sessions). */
export async function dropDatabases(): Promise<void> {
  for (const name of made.splice(0)) await psql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}
