import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import pino from 'pino';
import { REPORT_LIMITS, type EventList, type NodeView } from '@llmgw/shared';
import { makeServerSettings } from './live-server.js';
import { makeModel, makeReport, makeReportOfBytes } from './factories.js';
import { NODE_PAGE_BYTES, NODE_PAGE_MAX } from '../src/api/node-pages.js';
import { startServer } from '../src/server.js';
import { tempDirs } from './temp-dirs.js';

/**
 * Issue 27: one join token let 140 fake nodes report 3.9 MB each, which made the node
 * list 80 MB, stalled both listeners and grew the store without bound. Each repro here,
 * over the real agent and admin APIs of an in-process server on a real SQLite store:
 * the report is capped (413 and one event), the list is paged and bounded, a node waiting
 * for approval keeps only its identity, and joins are rate-limited per join token.
 * (How long /healthz takes meanwhile is measured by bench/report-flood.mjs, not here: a
 * figure in ms is not a test on a shared machine.)
 */
const model = makeModel({ name: 'm' });
const catalog = { models: [model], resolve: (n: string) => (n === 'm' ? model : undefined), suggest: () => [] };
const tmp = tempDirs('llmgw-flood-', afterAll);
const CAP = REPORT_LIMITS.reportBytes;
/** How many GPUs, full of problems, a report at the cap has. */
const GPUS_AT_CAP = makeReportOfBytes('n', CAP).gpus.length;

async function serve(extra: Parameters<typeof makeServerSettings>[1] = {}) {
  const dir = tmp();
  const s = await startServer(makeServerSettings(dir, extra), catalog, pino({ level: 'silent' }));
  const post = async (p: string, token: string, body: unknown) => {
    const r = await fetch(`${s.adminUrl}${p}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: r.status, headers: r.headers, body: (await r.json()) as Record<string, unknown> };
  };
  const get = async (p: string) => {
    const r = await fetch(`${s.adminUrl}/api/v1${p}`, { headers: { authorization: 'Bearer admin' } });
    const text = await r.text();
    return { status: r.status, next: r.headers.get('x-next-cursor'), bytes: Buffer.byteLength(text), body: JSON.parse(text) as unknown };
  };
  const join = async (id: string) => {
    const r = await post('/agent/v1/join', 'join', { node_id: id });
    if (r.status !== 200) throw new Error(`join ${id}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.credential as string;
  };
  const beat = (credential: string, report: unknown, shards: unknown[] = []) => post('/agent/v1/heartbeat', credential, { report, shards });
  const refusals = async () =>
    ((await get('/events')).body as EventList).events.filter((e) => e.reason === 'report-refused').map((e) => [e.type, e.object, e.message]);
  return { s, dir, post, get, join, beat, refusals };
}

describe('a node report over the cap', () => {
  it('is refused with 413 and one event until the node reports within the cap again; its last report stays', async () => {
    const srv = await serve();
    try {
      const cred = await srv.join('n-1');
      expect((await srv.beat(cred, makeReportOfBytes('n-1', CAP))).status).toBe(200);
      const over = await srv.beat(cred, makeReportOfBytes('n-1', CAP + 1, { pool: 'other' }));
      expect(over).toMatchObject({ status: 413, body: { code: 'too_large', field: 'report' } });
      expect(over.body.error).toContain(`${CAP + 1} bytes as JSON, over the server's cap of ${CAP}`);
      expect((await srv.beat(cred, makeReportOfBytes('n-1', CAP + 1))).status).toBe(413);
      expect(await srv.refusals()).toEqual([
        [
          'Warning',
          'node/n-1',
          `refused the report of n-1 (${CAP + 1} bytes, over the cap of ${CAP} bytes): its last report within the cap stays in force until it sends a smaller one`,
        ],
      ]);
      // The report at the cap stands: not the refused one's pool.
      const [node] = (await srv.get('/nodes')).body as NodeView[];
      expect(node).toMatchObject({ id: 'n-1', gpu_total: GPUS_AT_CAP });
      expect(node!.pool).toBeUndefined();
      // Accepted again, then refused again: a second event.
      expect((await srv.beat(cred, makeReport({ node_id: 'n-1' }))).status).toBe(200);
      expect((await srv.beat(cred, makeReportOfBytes('n-1', CAP + 1))).status).toBe(413);
      expect(await srv.refusals()).toHaveLength(2);
    } finally {
      await srv.s.close();
    }
  });

  it('refuses a whole heartbeat over its cap the same way, naming the heartbeat', async () => {
    const srv = await serve();
    try {
      const cred = await srv.join('n-1');
      // Shard statuses with long log tails: each within its bounds, together over the body's cap.
      const shards = Array.from({ length: 20 }, (_, i) => ({ id: `s${i}`, replica_id: `r${i}`, state: 'ready', log_tail: 'x'.repeat(60_000) }));
      const r = await srv.beat(cred, makeReport({ node_id: 'n-1' }), shards);
      expect(r).toMatchObject({ status: 413, body: { code: 'too_large' } });
      expect((await srv.refusals()).map(([, , m]) => m)).toEqual([
        expect.stringMatching(/^refused the heartbeat of n-1 \(\d+ bytes, over the cap of 1048576 bytes\)/),
      ]);
    } finally {
      await srv.s.close();
    }
  });
});

describe('the node list', () => {
  it('is paged, bounded in bytes, and its pages together hold every node once, in order', async () => {
    const srv = await serve();
    try {
      const ids = Array.from({ length: 24 }, (_, i) => `n-${String(i).padStart(2, '0')}`);
      for (const id of ids) expect((await srv.beat(await srv.join(id), makeReportOfBytes(id, CAP))).status).toBe(200);
      const seen: string[] = [];
      let after: string | null = null;
      let pages = 0;
      do {
        const page = await srv.get(`/nodes${after ? `?after=${after}` : ''}`);
        const nodes = page.body as NodeView[];
        // At most the byte budget and one node more (a node's view is bounded by its report).
        expect(page.bytes).toBeLessThan(NODE_PAGE_BYTES + 2 * CAP);
        expect(nodes.length).toBeGreaterThan(0);
        seen.push(...nodes.map((n) => n.id));
        if (page.next) expect(page.next).toBe(nodes.at(-1)!.id);
        after = page.next;
        pages++;
      } while (after);
      expect(seen).toEqual(ids);
      expect(pages).toBeGreaterThan(1);
      // Small reports: `limit` pages them too.
      const two = await srv.get('/nodes?limit=2');
      expect([(two.body as NodeView[]).map((n) => n.id), two.next]).toEqual([['n-00', 'n-01'], 'n-01']);
      const last = await srv.get('/nodes?after=n-22&limit=5');
      expect([(last.body as NodeView[]).map((n) => n.id), last.next]).toEqual([['n-23'], null]);
      expect((await srv.get(`/nodes?limit=${NODE_PAGE_MAX + 1}`)).status).toBe(400);
      expect((await srv.get('/nodes?limit=0')).status).toBe(400);
    } finally {
      await srv.s.close();
    }
  });
});

describe('a node waiting for approval', () => {
  it('keeps only its identity, in memory and in the store, until it is approved', async () => {
    const srv = await serve({ joinApproval: 'manual' });
    try {
      const cred = await srv.join('n-1');
      const full = makeReportOfBytes('n-1', CAP, { hostname: 'gpu-1.lan', agent_version: '9.9' });
      expect((await srv.beat(cred, full)).status).toBe(200);
      const [pending] = (await srv.get('/nodes')).body as NodeView[];
      expect(pending).toMatchObject({
        id: 'n-1',
        state: 'pending-approval',
        hostname: 'gpu-1.lan',
        agent_version: '9.9',
        labels: {},
        gpu_total: 0,
        unhealthy_gpus: [],
      });
      await srv.s.controller.inventory.persistReports();
      const stored = () => {
        const db = new Database(path.join(srv.dir, 'llmgw.db'), { readonly: true });
        const row = db.prepare('SELECT report FROM nodes WHERE id = ?').get('n-1') as { report: string };
        db.close();
        return Buffer.byteLength(row.report);
      };
      expect(stored()).toBeLessThan(200);
      expect((await srv.post('/api/v1/nodes/n-1/approve', 'admin', {})).status).toBe(200);
      expect((await srv.beat(cred, full)).status).toBe(200);
      expect(((await srv.get('/nodes')).body as NodeView[])[0]).toMatchObject({ state: 'ready', gpu_total: GPUS_AT_CAP });
      await srv.s.controller.inventory.persistReports();
      expect(stored()).toBe(CAP);
    } finally {
      await srv.s.close();
    }
  });
});

describe('joins', () => {
  it('are rate-limited per join token: a burst of --join-rate, then 429 with Retry-After; a rotated token starts afresh', async () => {
    const srv = await serve({ joinRate: 3, joinTokenFile: path.join(tmp(), 'join-token') });
    try {
      for (const id of ['a', 'b', 'c']) await srv.join(id);
      const refused = await srv.post('/agent/v1/join', 'join', { node_id: 'd' });
      expect(refused).toMatchObject({ status: 429, body: { code: 'rate_limited' } });
      expect(refused.body.error).toContain('--join-rate 3 per minute');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      // A wrong token is refused as such, and uses up nothing.
      expect((await srv.post('/agent/v1/join', 'wrong', { node_id: 'd' })).status).toBe(401);
      expect(((await srv.get('/nodes')).body as NodeView[]).map((n) => n.id)).toEqual(['a', 'b', 'c']);
      const rotated = await srv.post('/api/v1/join-token/rotate', 'admin', {});
      expect(rotated.status).toBe(200);
      expect((await srv.post('/agent/v1/join', rotated.body.token as string, { node_id: 'd' })).status).toBe(200);
    } finally {
      await srv.s.close();
    }
  });
});
