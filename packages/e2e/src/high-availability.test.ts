import fs from 'node:fs';
import path from 'node:path';
import { afterAll, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import type { KeyCreated, NodeView, ReplicaView, StatusView } from '@llmgw/shared';
import { ADMIN_TOKEN, adminFetch, cleanup, ctl, ctlJson, eventually, removeTmp, startAgent, tmpDir, type Proc } from './harness.js';
import { instance, PAIR_CATALOG, type Instance } from './instances.js';
import { describePostgres, dropDatabases, freshDatabase } from './postgres.js';

/**
 * Journeys (issue 16): two server instances on one PostgreSQL, two agents given both
 * addresses. The leader SIGKILLed under load through the other instance's gateway: no
 * failed request, the same replicas and engines, a new leader within 5 s; then the same
 * the other way round. Keys, revocations and cordons made through one instance hold on
 * the other within a second. A leader paused past its lease and resumed changes nothing.
 */

afterAll(async () => {
  await cleanup();
  await dropDatabases();
  removeTmp();
});

const agentArgs = ['--stop-engines-on-exit', '--restart-backoff', '0.2'];

async function status(url: string): Promise<StatusView> {
  const res = await adminFetch(`${url}/api/v1/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (!res.ok) throw new Error(`status ${res.status}`);
  return (await res.json()) as StatusView;
}

async function replicas(url: string): Promise<ReplicaView[]> {
  const res = await adminFetch(`${url}/api/v1/replicas`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (!res.ok) throw new Error(`replicas ${res.status}`);
  return (await res.json()) as ReplicaView[];
}

/** Two instances (A leading, started first), two agents given both addresses, both replicas ready. */
async function cluster(text = PAIR_CATALOG, spread = true) {
  const db = await freshDatabase();
  const catalog = path.join(tmpDir('llmgw-catalog-'), 'catalog.yaml');
  fs.writeFileSync(catalog, text);
  const a = await instance(db, 'inst-a', catalog);
  await eventually(async () => (await status(a.adminUrl)).leader.instance === 'inst-a', 10_000, 'A leading');
  const b = await instance(db, 'inst-b', catalog);
  const both = `${a.adminUrl},${b.adminUrl}`;
  // Both agents share this machine: disjoint port ranges keep their engines from racing
  // for one port (an engine that loses restarts, which is what these journeys look for).
  const base = 41_000 + Math.floor(Math.random() * 80) * 100;
  const agents = ['cpu-a', 'cpu-b'].map((nodeId, i) =>
    startAgent({ server: both, nodeId, proc: 'cpu-32gb', token: a.joinToken, args: [...agentArgs, '--port-range', `${base + i * 50}-${base + i * 50 + 49}`] }),
  );
  let last: ReplicaView[] = [];
  const before = await eventually(
    async () => {
      const rs = (last = await replicas(b.adminUrl));
      return rs.length === 2 && rs.every((r) => r.state === 'ready') && (!spread || new Set(rs.map((r) => r.shards[0]!.node)).size === 2) && rs;
    },
    40_000,
    'two ready replicas, one per node',
  ).catch((e: Error) => {
    const warnings = [a, b, ...agents].flatMap((p) =>
      p
        .output()
        .split('\n')
        .filter((l) => /"level":[4-6]0/.test(l)),
    );
    throw new Error(`${e.message}; last seen: ${JSON.stringify(last)}; warnings and errors:\n${warnings.join('\n')}`);
  });
  return { a, b, agents, before, catalog };
}

/** Each replica's id with its engine's pid and restarts, sorted: what must not change. */
const identity = (rs: ReplicaView[]) => rs.map((r) => [r.id, r.shards[0]!.pid, r.shards[0]!.restarts ?? 0, r.state] as const).sort();

/** Steady chat completions through one gateway until stopped; every failure is kept. */
function load(clientUrl: string, secret: string, workers = 2) {
  const client = new OpenAI({ apiKey: secret, baseURL: `${clientUrl}/v1`, maxRetries: 0, timeout: 10_000 });
  let running = true;
  let ok = 0;
  const failed: string[] = [];
  const done = Promise.all(
    Array.from({ length: workers }, async () => {
      while (running) {
        try {
          await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'a b c' }] });
          ok++;
        } catch (e) {
          failed.push((e as Error).message);
        }
      }
    }),
  );
  return { ok: () => ok, failed, stop: async () => ((running = false), await done) };
}

/** Polls one instance's replicas until stopped, keeping every replica id and identity it ever saw. */
function watchReplicas(url: string) {
  let running = true;
  const ids = new Set<string>();
  const shapes = new Set<string>();
  const done = (async () => {
    while (running) {
      try {
        const rs = await replicas(url);
        for (const r of rs) ids.add(r.id);
        shapes.add(JSON.stringify(rs.map((r) => [r.id, r.shards[0]!.pid]).sort()));
      } catch {
        // An instance busy for a moment is not what this watches.
      }
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
  return { ids, shapes, stop: async () => ((running = false), await done) };
}

/** How long after `from` the survivor names itself leader (polled every 50 ms). */
async function newLeaderAfter(survivor: Instance, from: number): Promise<number> {
  while (Date.now() - from < 15_000) {
    const s = await status(survivor.adminUrl).catch(() => undefined);
    if (s?.leader.instance === survivor.id) return Date.now() - from;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${survivor.id} not leading 15 s after its peer stopped`);
}

/**
 * SIGKILLs `leader` under load through `survivor`'s gateway and checks what the issue
 * promises; returns the time to the new leader in ms.
 */
async function killLeaderUnderLoad(leader: Instance, survivor: Instance, secret: string, before: ReplicaView[]): Promise<number> {
  expect((await ctlJson<StatusView>(survivor.adminUrl, ['status'])).leader.instance).toBe(leader.id);
  const watch = watchReplicas(survivor.adminUrl);
  const traffic = load(survivor.clientUrl, secret);
  let failoverMs: number;
  let served: number;
  try {
    await eventually(() => traffic.ok() > 20 || (traffic.failed.length > 0 && Promise.reject(new Error(traffic.failed[0]))), 10_000, 'traffic flowing');
    const killedAt = Date.now();
    await leader.stop('SIGKILL');
    failoverMs = await newLeaderAfter(survivor, killedAt);
    // Past the new leader's first reconcile passes (1 s interval) and the not-ready grace (3 s).
    served = traffic.ok();
    await new Promise((r) => setTimeout(r, 4000));
  } finally {
    await traffic.stop();
    await watch.stop();
  }
  expect(traffic.failed).toEqual([]);
  expect(traffic.ok()).toBeGreaterThan(served);
  expect([...watch.ids].sort()).toEqual(before.map((r) => r.id).sort());
  expect([...watch.shapes]).toEqual([JSON.stringify(before.map((r) => [r.id, r.shards[0]!.pid]).sort())]);
  expect(identity(await ctlJson<ReplicaView[]>(survivor.adminUrl, ['replicas']))).toEqual(identity(before));
  expect(failoverMs).toBeLessThan(5000);
  return failoverMs;
}

describePostgres('two instances on one PostgreSQL', () => {
  it('survives the leader SIGKILLed under load, then the other one: no failed request, same replicas and engines', async () => {
    const { before, ...both } = await cluster();
    let { a } = both;
    const { b } = both;
    expect(identity(before).every(([, , restarts, state]) => restarts === 0 && state === 'ready')).toBe(true);
    const secret = (await ctlJson<KeyCreated>(b.adminUrl, ['keys', 'create', '--name', 'load'])).secret;

    const first = await killLeaderUnderLoad(a, b, secret, before);
    console.log(`leader SIGKILLed under load through B: new leader in ${first} ms (lease 2 s)`);

    // A back on the same data dir and ports: listed again (a new start), B still leading.
    const aStartedBefore = (await status(b.adminUrl)).instances.find((i) => i.id === 'inst-a')!.started;
    a = await a.start();
    await eventually(
      async () => {
        const s = await ctlJson<StatusView>(b.adminUrl, ['status']);
        const listed = s.instances.find((i) => i.id === 'inst-a');
        return listed && listed.started !== aStartedBefore && s.leader.instance === 'inst-b';
      },
      15_000,
      'A listed again in ctl status',
    );
    await eventually(async () => (await replicas(a.adminUrl)).every((r) => r.state === 'ready'), 10_000, 'A sees both replicas ready');

    const second = await killLeaderUnderLoad(b, a, secret, before);
    console.log(`leader SIGKILLed under load through A: new leader in ${second} ms (lease 2 s)`);
    // B back too: both listed, A still leading (a returning instance does not take over).
    await b.start();
    await eventually(
      async () => {
        const s = await ctlJson<StatusView>(a.adminUrl, ['status']);
        return s.leader.instance === 'inst-a' && s.instances.filter((i) => i.last_seen_s <= 1).length === 2;
      },
      15_000,
      'both instances listed, A leading',
    );
  }, 120_000);

  it('a key made on A works on B within 1 s; a revocation on B stops it on A within 1 s; a cordon through B shows through A', async () => {
    const { a, b } = await cluster();
    const chat = (clientUrl: string, secret: string) =>
      fetch(`${clientUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
      }).then((r) => r.status);
    const until = async (what: string, fn: () => Promise<boolean>): Promise<number> => {
      const t0 = Date.now();
      while (!(await fn())) {
        if (Date.now() - t0 > 5000) throw new Error(`${what}: not within 5 s`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return Date.now() - t0;
    };

    // The writes go to the admin API itself, so the clock starts when the instance
    // acknowledged the write (ctl's own start-up would be in the figure otherwise).
    const api = (url: string, method: string, p: string, body?: unknown) =>
      adminFetch(`${url}/api/v1${p}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        ...(body ? { body: JSON.stringify(body) } : {}),
      }).then(async (r) => ({ status: r.status, body: await r.json() }));

    expect(await chat(b.clientUrl, 'sk-llmgw-not-a-key')).toBe(401);
    const createdRes = await api(a.adminUrl, 'POST', '/keys', { name: 'app' });
    expect(createdRes.status).toBe(201);
    const created = createdRes.body as KeyCreated;
    const works = await until('key works on B', async () => (await chat(b.clientUrl, created.secret)) === 200);
    expect(await chat(a.clientUrl, created.secret)).toBe(200);
    expect((await ctlJson<{ id: string }[]>(b.adminUrl, ['keys', 'list'])).map((k) => k.id)).toContain(created.key.id);

    expect((await api(b.adminUrl, 'DELETE', `/keys/${created.key.id}`)).status).toBe(200);
    const stops = await until('revoked key refused on A', async () => (await chat(a.clientUrl, created.secret)) === 401);
    expect(await chat(b.clientUrl, created.secret)).toBe(401);

    expect(await api(b.adminUrl, 'POST', '/nodes/cpu-a/state', { state: 'cordon', reason: 'disk check' })).toEqual({
      status: 200,
      body: { id: 'cpu-a', state: 'cordoned', reason: 'disk check' },
    });
    const cordoned = await until('cordon seen through A', async () => {
      const res = await api(a.adminUrl, 'GET', '/nodes');
      return (res.body as NodeView[]).some((n) => n.id === 'cpu-a' && n.state === 'cordoned');
    });
    expect((await ctlJson<NodeView[]>(a.adminUrl, ['nodes'])).find((n) => n.id === 'cpu-a')).toMatchObject({ state: 'cordoned', state_reason: 'disk check' });
    // And ctl's own cordon through B, the operator's way, shows through A as well.
    const cordon = await ctl(b.adminUrl, ['cordon', 'cpu-b', '--reason', 'fan']);
    expect([cordon.code, cordon.stdout]).toEqual([0, 'node/cpu-b cordoned\n']);
    await until('ctl cordon seen through A', async () =>
      (await ctlJson<NodeView[]>(a.adminUrl, ['nodes'])).some((n) => n.id === 'cpu-b' && n.state === 'cordoned'),
    );

    console.log(`across instances: key usable in ${works} ms, revocation in ${stops} ms, cordon in ${cordoned} ms`);
    expect(works).toBeLessThan(1000);
    expect(stops).toBeLessThan(1000);
    expect(cordoned).toBeLessThan(1000);
  }, 90_000);

  it('a leader paused past its lease and resumed changes nothing', async () => {
    const { a, b, agents, before } = await cluster();
    const launches = (p: Proc) => (p.output().match(/"msg":"engine started"/g) ?? []).length;
    const launchedBefore = agents.map(launches);

    a.child.kill('SIGSTOP');
    const pausedAt = Date.now();
    const took = await newLeaderAfter(b, pausedAt);
    console.log(`leader paused (SIGSTOP): B leads after ${took} ms`);
    // Paused past --lost-after (6 s): the old leader's memory says both nodes went silent,
    // so were it to act on it when it resumes, it would replace both replicas.
    await new Promise((r) => setTimeout(r, Math.max(0, 7000 - (Date.now() - pausedAt))));
    a.child.kill('SIGCONT');

    const watchA = watchReplicas(a.adminUrl);
    const watchB = watchReplicas(b.adminUrl);
    await a.waitFor(/lost leadership/, 10_000);
    await new Promise((r) => setTimeout(r, 4000));
    await Promise.all([watchA.stop(), watchB.stop()]);

    const same = JSON.stringify(before.map((r) => [r.id, r.shards[0]!.pid]).sort());
    expect([...watchB.shapes]).toEqual([same]);
    expect([...watchA.shapes]).toEqual([same]);
    for (const url of [a.adminUrl, b.adminUrl]) {
      expect(identity(await ctlJson<ReplicaView[]>(url, ['replicas']))).toEqual(identity(before));
      expect((await ctlJson<StatusView>(url, ['status'])).leader.instance).toBe('inst-b');
    }
    expect(agents.map(launches)).toEqual(launchedBefore);
    expect(a.output()).not.toMatch(/became leader \(epoch [2-9]/);
  }, 90_000);

  it('a rollout goes on across a leader SIGKILL: each old replica replaced once, no double start, no failed request', async () => {
    // Room for one surge replica beside each old one (12 of 32 GB each), and new replicas
    // that take 2.5 s to load, so the leader dies with a replacement still starting.
    const roomy = PAIR_CATALOG.replace('min_memory_gb: 20', 'min_memory_gb: 12');
    const { a, b, before, catalog } = await cluster(roomy, false);
    const secret = (await ctlJson<KeyCreated>(b.adminUrl, ['keys', 'create', '--name', 'load'])).secret;
    const watch = watchReplicas(b.adminUrl);
    const traffic = load(b.clientUrl, secret);
    try {
      await eventually(() => traffic.ok() > 10, 10_000, 'traffic flowing');
      fs.writeFileSync(catalog, roomy.replace('"{api_key}"]', '"{api_key}", --load-delay-ms, "2500"]'));
      const oldRevision = before[0]!.revision;
      await eventually(
        async () => (await replicas(b.adminUrl)).some((r) => r.revision !== oldRevision && r.state !== 'ready'),
        15_000,
        'a replacement starting',
      );
      await a.stop('SIGKILL');
      const done = await ctl(b.adminUrl, ['rollout', 'status', 'echo', '--timeout', '60s']);
      expect([done.code, done.stderr]).toEqual([0, '']);
    } finally {
      await traffic.stop();
      await watch.stop();
    }
    expect(traffic.failed).toEqual([]);
    const after = await replicas(b.adminUrl);
    expect(after.map((r) => r.state)).toEqual(['ready', 'ready']);
    expect(new Set(after.map((r) => r.revision)).size).toBe(1);
    expect(after[0]!.revision).not.toBe(before[0]!.revision);
    // Two old and two new: a replacement the dead leader planned was taken over, not planned again.
    expect(watch.ids.size).toBe(4);
  }, 120_000);
});
