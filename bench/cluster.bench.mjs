// Several servers on one PostgreSQL (issue 16), in one run beside the SQLite baseline:
//
// (a) Heartbeats ingested per second by one instance, SQLite vs PostgreSQL: one real
//     server per store (each pinned to core 0 where taskset exists), N fake nodes joined
//     through the agent API, then heartbeats from 64 keep-alive connections for a fixed
//     time, the stores alternating round by round. Every beat carries a new report (GPU
//     0's memory_used_mb counts the node's beats), so each one is a write: both stores
//     take them in batches every 250 ms (SQLite the changed reports, PostgreSQL every beat). At the end each
//     server is stopped (SIGTERM: its shutdown writes its last batch) and the database
//     must hold each node's last accepted report: the bench fails on any one missing, a
//     lost write. Where the time goes: the server's CPU and the PostgreSQL cluster's
//     (every backend) from /proc.
// (b) Leader failover: two instances on one database; SIGKILL the leader and time the
//     other's "became leader" and its first reconcile pass as leader (pino's `time`),
//     over several tries, restarting the killed one between them.
//
// PostgreSQL runs with its durable defaults (fsync, synchronous_commit on). `--quick`:
// a smoke run of a few seconds per part. `--baseline=DIR` (or LLMGW_BENCH_BASELINE): a
// built checkout of an earlier revision, whose server takes part (a) as a third store on
// its own database, started through its own bench/lib.mjs, for a same-run comparison:
//   git worktree add --detach /tmp/llmgw-base REV && (cd /tmp/llmgw-base && pnpm install && pnpm build)
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { JOIN, Pool, cpuSeconds, percentile, serverRequire, startServer, table, tmp, treeCpuSeconds, waitFor, withPostgres } from './lib.mjs';

const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 1 : 3;
const SECONDS = quick ? 2 : 6;
const NODES = quick ? 200 : 1000;
const CONNECTIONS = 64;
const TRIES = quick ? 2 : 5;
const LEASE_S = Number(process.argv.find((a) => a.startsWith('--leader-lease='))?.split('=')[1] ?? 2);
const BASELINE = process.argv.find((a) => a.startsWith('--baseline='))?.slice('--baseline='.length) ?? process.env.LLMGW_BENCH_BASELINE;

const pg = serverRequire('pg');
const Database = serverRequire('better-sqlite3');
// The admin listener's certificate is the server's own CA's; the bench reads no files to trust it.
const insecure = { connect: { rejectUnauthorized: false } };

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { min: s[0], med: percentile(s, 50), max: s[s.length - 1] };
};

/** A minimal valid report of an 8-GPU node; `seq` goes into GPU 0's memory_used_mb. */
function report(id, seq) {
  const gpus = Array.from({ length: 8 }, (_, i) => ({
    index: i,
    uuid: `GPU-${id}-${i}`,
    name: 'NVIDIA H100 80GB HBM3',
    class: 'H100-80GB',
    memory_total_mb: 81920,
    memory_used_mb: i === 0 ? seq : 0,
    problems: [],
  }));
  return {
    node_id: id,
    hostname: id,
    mgmt_addr: '10.0.0.1',
    agent_version: 'bench',
    labels: { zone: 'a' },
    memory_total_mb: 1048576,
    cpu_cores: 64,
    gpus,
    fabrics: ['ethernet'],
  };
}
/** A shard status of a replica this server does not know (a valid, ignored entry). */
const shards = (id) => [{ id: `bench-${id}-0`, replica_id: `bench-${id}`, state: 'ready', pid: 4242, port: 40001 }];

async function joinAll(adminUrl) {
  const pool = new Pool(adminUrl, { connections: 16, ...insecure });
  const nodes = Array.from({ length: NODES }, (_, i) => ({ id: `hb-${String(i).padStart(5, '0')}`, credential: '', seq: 0, accepted: -1 }));
  for (let i = 0; i < nodes.length; i += 16) {
    await Promise.all(
      nodes.slice(i, i + 16).map(async (n) => {
        const r = await pool.request({
          path: '/agent/v1/join',
          method: 'POST',
          headers: { authorization: `Bearer ${JOIN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ node_id: n.id }),
        });
        const text = await r.body.text();
        if (r.statusCode !== 200) throw new Error(`join ${n.id}: ${r.statusCode} ${text}`);
        n.credential = JSON.parse(text).credential;
      }),
    );
  }
  await pool.close();
  return nodes;
}

/** Heartbeats from CONNECTIONS workers for `ms`, each worker owning every CONNECTIONS-th node. */
async function beat(pool, nodes, ms) {
  let ok = 0;
  const refused = new Map();
  const end = Date.now() + ms;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, w) => {
      const mine = nodes.filter((_, i) => i % CONNECTIONS === w);
      for (let k = 0; Date.now() < end; k++) {
        const n = mine[k % mine.length];
        const seq = ++n.seq;
        const r = await pool.request({
          path: '/agent/v1/heartbeat',
          method: 'POST',
          headers: { authorization: `Bearer ${n.credential}`, 'content-type': 'application/json' },
          body: JSON.stringify({ report: report(n.id, seq), shards: shards(n.id) }),
        });
        await r.body.dump();
        if (r.statusCode === 200) {
          ok++;
          n.accepted = seq;
        } else refused.set(r.statusCode, (refused.get(r.statusCode) ?? 0) + 1);
      }
    }),
  );
  return { ok, refused };
}

/**
 * The nodes whose last accepted report the store does not hold, or holds with a write
 * time before `fromMs` (each with what the store has): a lost write, once the server
 * that accepted them has written what it had and exited.
 */
async function missingReports(store, nodes, fromMs) {
  let rows;
  if (store.kind === 'postgres') {
    const c = new pg.Client(store.databaseUrl);
    await c.connect();
    rows = (await c.query(`SELECT id, (report->'gpus'->0->>'memory_used_mb')::bigint AS seq, last_seen_ms FROM nodes`)).rows.map((r) => ({
      id: r.id,
      seq: Number(r.seq),
      seen: Number(r.last_seen_ms),
    }));
    await c.end();
  } else {
    const db = new Database(path.join(store.server.dataDir, 'llmgw.db'), { readonly: true, fileMustExist: true });
    rows = db
      .prepare('SELECT id, report, last_seen_ms FROM nodes')
      .all()
      .map((r) => ({ id: r.id, seq: r.report ? JSON.parse(r.report).gpus[0].memory_used_mb : -1, seen: Number(r.last_seen_ms) }));
    db.close();
  }
  const byId = new Map(rows.map((r) => [r.id, r]));
  return nodes
    .filter((n) => byId.get(n.id)?.seq !== n.accepted || byId.get(n.id).seen < fromMs)
    .map((n) => `${n.id} (accepted ${n.accepted}, stored ${byId.get(n.id)?.seq ?? 'none'})`);
}

async function dbNowMs(url) {
  const c = new pg.Client(url);
  await c.connect();
  const { rows } = await c.query('SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS ms');
  await c.end();
  return Number(rows[0].ms);
}

async function createDatabase(url, name) {
  const c = new pg.Client(url);
  await c.connect();
  await c.query(`CREATE DATABASE ${name}`);
  await c.end();
  return url.replace(/\/postgres$/, `/${name}`);
}

async function heartbeats(cluster) {
  const catalog = path.join(tmp('llmgw-cluster-bench-'), 'catalog.yaml');
  fs.writeFileSync(catalog, 'models: []\n');
  const databaseUrl = await createDatabase(cluster.url, 'heartbeats');
  // Joins are rate-limited (--join-rate, 60 a minute by default): raised so that every node joins at once.
  const env = { LLMGW_JOIN_RATE: String(NODES * 2) };
  const stores = [
    { kind: 'sqlite', server: await startServer({ dir: tmp('llmgw-hb-sqlite-'), core: 0, catalog, env }) },
    { kind: 'postgres', databaseUrl, server: await startServer({ dir: tmp('llmgw-hb-pg-'), core: 0, catalog, databaseUrl, env }) },
  ];
  if (BASELINE) {
    const base = await import(pathToFileURL(path.join(path.resolve(BASELINE), 'bench', 'lib.mjs')).href);
    const url = await createDatabase(cluster.url, 'heartbeats_baseline');
    const server = await base.startServer({ dir: tmp('llmgw-hb-base-'), core: 0, catalog, databaseUrl: url, env });
    stores.push({ kind: 'postgres', label: 'postgres (baseline)', baseline: true, databaseUrl: url, server });
  }
  for (const s of stores) {
    s.nodes = await joinAll(s.server.adminUrl);
    s.pool = new Pool(s.server.adminUrl, { connections: CONNECTIONS, pipelining: 1, ...insecure });
    await beat(s.pool, s.nodes, 1000); // warm-up: connections, JIT, every node's first report
    s.rounds = [];
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of round % 2 ? [...stores].reverse() : stores) {
      s.windowStart = s.kind === 'postgres' ? await dbNowMs(s.databaseUrl) : Date.now();
      const [c0, p0, l0, t0] = [cpuSeconds(s.server.pid), treeCpuSeconds(cluster.pid), process.cpuUsage(), Date.now()];
      const { ok, refused } = await beat(s.pool, s.nodes, SECONDS * 1000);
      const wall = (Date.now() - t0) / 1000;
      const l = process.cpuUsage(l0);
      const [server, postgres, load] = [cpuSeconds(s.server.pid) - c0, treeCpuSeconds(cluster.pid) - p0, (l.user + l.system) / 1e6];
      // Then the server idle for one pull's reach (its cursor less the 2 s overlap, and a
      // pull every 500 ms): what it spends there is its last batch, a pass, and the pulls
      // that still bring back the rows changed in the round.
      const c1 = cpuSeconds(s.server.pid);
      await new Promise((r) => setTimeout(r, 2500));
      const after = cpuSeconds(s.server.pid) - c1;
      s.rounds.push({ perS: ok / wall, server, postgres, load, wall, ok, refused, after });
    }
  }
  for (const s of stores) {
    await s.pool.close();
    // The server's own shutdown writes what it holds unwritten (its last batch) before it
    // exits: after that, an accepted report not in the store is a lost write, not a late one.
    // Out of the way of part (b) too: the idle PostgreSQL instance still polls every 500 ms.
    s.server.child.kill('SIGTERM');
    const code = await s.server.exited;
    if (code !== 0) throw new Error(`${s.label ?? s.kind} server exited ${code} at SIGTERM:\n${s.server.output().slice(-3000)}`);
    s.missing = await missingReports(s, s.nodes, s.windowStart);
  }

  const rows = stores.flatMap((s) =>
    s.rounds.map((r, i) => [
      s.label ?? s.kind,
      i + 1,
      r.perS.toFixed(0),
      `${((r.server / r.wall) * 100).toFixed(0)} %`,
      ((r.server / r.ok) * 1e6).toFixed(0),
      `${((r.postgres / r.wall) * 100).toFixed(0)} %`,
      ((r.postgres / r.ok) * 1e6).toFixed(0),
      ((r.load / r.ok) * 1e6).toFixed(0),
      (r.after * 1000).toFixed(0),
      [...r.refused].map(([code, n]) => `${n}×${code}`).join(' ') || '0',
    ]),
  );
  console.log(
    `\n(a) Heartbeats ingested by one instance: ${NODES} nodes, ${CONNECTIONS} connections, ${SECONDS} s per round, stores alternating; a new report every beat (8 GPUs, one shard)\n`,
  );
  console.log(
    table(
      [
        'store',
        'round',
        'accepted/s',
        'server CPU',
        'server µs/beat',
        'postgres CPU',
        'postgres µs/beat',
        'load-gen µs/beat',
        'server ms, 2.5 s after',
        'refused',
      ],
      rows,
    ),
  );
  const [sq, pq, bq] = stores.map((s) => stats(s.rounds.map((r) => r.perS)));
  console.log(
    `\naccepted/s min/median: SQLite ${sq.min.toFixed(0)}/${sq.med.toFixed(0)}, PostgreSQL ${pq.min.toFixed(0)}/${pq.med.toFixed(0)}; PostgreSQL / SQLite (medians) ${(pq.med / sq.med).toFixed(2)}. Goal: >= 5,000/s per instance.`,
  );
  if (bq) {
    const us = (s) => stats(s.rounds.map((r) => (r.server / r.ok) * 1e6)).med;
    const after = (s) => stats(s.rounds.map((r) => r.after * 1000)).med;
    console.log(
      `PostgreSQL vs the baseline (${BASELINE}), same run, medians: accepted/s ${pq.med.toFixed(0)} vs ${bq.med.toFixed(0)} (${(pq.med / bq.med).toFixed(2)}x), server µs/beat ${us(stores[1]).toFixed(0)} vs ${us(stores[2]).toFixed(0)}, server ms in the 2.5 s after a round ${after(stores[1]).toFixed(0)} vs ${after(stores[2]).toFixed(0)}`,
    );
  }
  for (const s of stores) {
    console.log(
      `${s.label ?? s.kind}: ${NODES - s.missing.length}/${NODES} nodes' last accepted reports in the store after the server's shutdown, written in the last round`,
    );
  }
  console.log(
    `(server pinned to one core where taskset exists; "postgres CPU" is the whole cluster, every backend; the load generator shares the other core with PostgreSQL)`,
  );
  const lost = stores.filter((s) => s.missing.length && !s.baseline);
  if (lost.length) {
    throw new Error(
      `accepted reports lost: ${lost.map((s) => `${s.label ?? s.kind} ${s.missing.length} (${s.missing.slice(0, 5).join(', ')}${s.missing.length > 5 ? ', …' : ''})`).join('; ')}`,
    );
  }
  return stores;
}

/** The first line after `from` in a server's output whose msg matches `re`, parsed. */
function logLine(server, re, from = 0) {
  for (const line of server.output().slice(from).split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const j = JSON.parse(line);
      const m = typeof j.msg === 'string' && j.msg.match(re);
      if (m) return { ...j, m };
    } catch {
      // A partial line: the rest comes with the next read.
    }
  }
  return undefined;
}

async function failover(cluster) {
  const databaseUrl = await createDatabase(cluster.url, 'failover');
  const dir = tmp('llmgw-failover-bench-');
  const catalog = path.join(dir, 'catalog.yaml');
  fs.writeFileSync(catalog, 'models: []\n');
  const start = (id) => startServer({ dir: path.join(dir, id), catalog, databaseUrl, extraArgs: ['--instance-id', id, '--leader-lease', String(LEASE_S)] });
  const servers = { a: await start('a'), b: await start('b') };
  const leaderOf = () => Object.keys(servers).find((id) => logLine(servers[id], /^became leader \(epoch \d+\)/, servers[id].since ?? 0));
  let leader = await waitFor(async () => leaderOf(), 'a leader', 30_000);
  const tries = [];
  for (let t = 0; t < TRIES; t++) {
    const follower = leader === 'a' ? 'b' : 'a';
    const from = servers[follower].output().length;
    const killedAt = Date.now();
    servers[leader].child.kill('SIGKILL');
    await servers[leader].exited;
    const took = await waitFor(async () => logLine(servers[follower], /^became leader \(epoch (\d+)\)/, from), `${follower} to take over`, 30_000);
    const epoch = took.m[1];
    const pass = await waitFor(
      async () => logLine(servers[follower], new RegExp(`^first reconcile pass as leader \\(epoch ${epoch}\\)`), from),
      `${follower}'s first pass as leader`,
      30_000,
    );
    tries.push({ leader: took.time - killedAt, pass: pass.time - killedAt });
    // The killed one back as a follower, before the next try kills the new leader.
    servers[leader] = await start(leader);
    await new Promise((r) => setTimeout(r, LEASE_S * 1000));
    leader = follower;
  }
  const l = stats(tries.map((x) => x.leader));
  const p = stats(tries.map((x) => x.pass));
  console.log(`\n(b) Leader failover: two instances on one PostgreSQL, SIGKILL of the leader, ${TRIES} tries (ms from the kill; --leader-lease ${LEASE_S})\n`);
  console.log(
    table(
      ['measure', 'min', 'median', 'max', 'each try'],
      [
        ['kill → other "became leader"', l.min, l.med, l.max, tries.map((x) => x.leader).join(', ')],
        ['kill → its first reconcile pass as leader', p.min, p.med, p.max, tries.map((x) => x.pass).join(', ')],
      ],
    ),
  );
  console.log(
    `Expected: the lease is renewed every ${LEASE_S / 4} s and a follower tries to take it as often, so the kill comes 0–${LEASE_S / 4} s after the last renewal and the takeover ${(LEASE_S * 3) / 4}–${LEASE_S + LEASE_S / 4} s after the kill.`,
  );
}

await withPostgres(quick, async (cluster) => {
  await heartbeats(cluster);
  await failover(cluster);
});
