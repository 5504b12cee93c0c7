import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { adminAuth, heartbeat, nodeAuth, liveServer, send, type LiveServer, type RawRequest } from './live-server.js';

/**
 * Issue 13's hand-picked malformed requests, one row each: every one is a 4xx naming
 * the field or header at fault (the admin and agent APIs answer JSON with `field`; the
 * dashboard answers a page), and none of them changes anything.
 */

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  headers: { 'content-type': 'application/json', ...headers },
  body: typeof body === 'string' ? body : JSON.stringify(body),
});
const deep = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
const admin = (r: RawRequest & { headers?: Record<string, string> }): RawRequest => ({ ...r, headers: { ...adminAuth, ...r.headers } });
const agent = (r: RawRequest & { headers?: Record<string, string> }): RawRequest => ({ ...r, headers: { ...nodeAuth, ...r.headers } });
const state = (body: unknown, headers: Record<string, string> = {}) => admin({ method: 'POST', path: '/api/v1/nodes/node-a/state', ...json(body, headers) });
const beat = (body: unknown, headers: Record<string, string> = {}) => agent({ method: 'POST', path: '/agent/v1/heartbeat', ...json(body, headers) });

type Case = [name: string, request: RawRequest, status: number, field?: string];

const ADMIN_CASES: Case[] = [
  ['bad %-escape in an id', admin({ path: '/api/v1/replicas/%E0%A4%A/logs' }), 400, 'path'],
  ['bad %-escape in a key id', admin({ method: 'DELETE', path: '/api/v1/keys/%ZZ' }), 400, 'path'],
  ['unknown Content-Encoding', state({ state: 'cordon' }, { 'content-encoding': 'snappy' }), 415, 'content-encoding'],
  ['bad gzip', state('not gzip at all', { 'content-encoding': 'gzip' }), 400, 'content-encoding'],
  ['odd charset', state({ state: 'cordon' }, { 'content-type': 'application/json; charset=koi8-r' }), 415, 'content-type'],
  ['not JSON', state('{"state":'), 400, '(body)'],
  ['a 100 KB body', state({ state: 'cordon', reason: 'x'.repeat(100_000) }), 413, '(body)'],
  ['__proto__ as a state', state({ state: '__proto__' }), 400, 'state'],
  ['constructor as a state', state({ state: 'constructor' }), 400, 'state'],
  ['toString as a state', state({ state: 'toString' }), 400, 'state'],
  ['a deadline_s of 1e20', state({ state: 'drain', deadline_s: 1e20 }), 400, 'deadline_s'],
  ['an rpm of 1e20', admin({ method: 'POST', path: '/api/v1/keys', ...json({ name: 'x', rpm: 1e20 }) }), 400, 'rpm'],
  ['a tpm of 1e20', admin({ method: 'POST', path: '/api/v1/keys', ...json({ name: 'x', tpm: 1e20 }) }), 400, 'tpm'],
  ['a key update with a field it does not know', admin({ method: 'PATCH', path: '/api/v1/keys/k', ...json({ tpms: 5 }) }), 400, 'tpms'],
  ['a key update with a tpm of -1', admin({ method: 'PATCH', path: '/api/v1/keys/k', ...json({ tpm: -1 }) }), 400, 'tpm'],
  ['a key priority that is no band', admin({ method: 'POST', path: '/api/v1/keys', ...json({ name: 'x', priority: 'urgent' }) }), 400, 'priority'],
  ['a key body nested 5,000 deep', admin({ method: 'POST', path: '/api/v1/keys', ...json(`{"name":"x","extra":${deep(5000)}}`) }), 400, '(body)'],
  ['an unknown method', admin({ method: 'PUT', path: '/api/v1/nodes' }), 405, 'method'],
  ['an unknown method on keys', admin({ method: 'PATCH', path: '/api/v1/keys' }), 405, 'method'],
  ['an unknown method on metrics', admin({ method: 'POST', path: '/metrics' }), 405, 'method'],
  ['a 10 KB model name', admin({ path: `/api/v1/explain-placement?model=${'m'.repeat(10_000)}` }), 404, 'model'],
];

const AGENT_CASES: Case[] = [
  [
    'a heartbeat nested 150,000 deep (900 KB, inside the 1 MiB cap)',
    beat(`{"report":${JSON.stringify(heartbeat('deep').report).slice(0, -1)},"x":${deep(150_000)}},"shards":[]}`),
    400,
    '(body)',
  ],
  ['a heartbeat with memory 1e20', beat(heartbeat('huge', { memory_total_mb: 1e20 })), 400, 'report.memory_total_mb'],
  [
    'a heartbeat with 1,000 labels',
    beat(heartbeat('labels', { labels: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, 'v'])) })),
    400,
    'report.labels',
  ],
  [
    'a heartbeat with 10,000 GPUs',
    beat(heartbeat('gpus', { gpus: Array.from({ length: 10_000 }, (_, i) => ({ index: i, name: 'g', class: 'c', problems: [] })) })),
    400,
    'report.gpus',
  ],
  ['a heartbeat in bad gzip', beat('\x1f\x8b garbage', { 'content-encoding': 'gzip' }), 400, 'content-encoding'],
  ['a heartbeat in an unknown encoding', beat(heartbeat('enc'), { 'content-encoding': 'zstd-ish' }), 415, 'content-encoding'],
  [
    'a truncated gzip heartbeat',
    beat(
      zlib
        .gzipSync(JSON.stringify(heartbeat('trunc')))
        .subarray(0, 12)
        .toString('latin1'),
      { 'content-encoding': 'gzip' },
    ),
    400,
    'content-encoding',
  ],
  ['a heartbeat in latin1', beat(heartbeat('latin'), { 'content-type': 'application/json; charset=latin1' }), 415, 'content-type'],
  ['bad %-escape in a node id', agent({ path: '/agent/v1/nodes/%E0%A4%A/assignments?wait_ms=0' }), 400, 'path'],
  ['a wait_ms that is no number', agent({ path: '/agent/v1/nodes/node-a/assignments?wait_ms=soon' }), 400, 'wait_ms'],
  ['an unknown method', agent({ method: 'PUT', path: '/agent/v1/heartbeat' }), 405, 'method'],
];

const form = (body: string, headers: Record<string, string> = {}): Pick<RawRequest, 'headers' | 'body'> => ({
  headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  body,
});

function dashboardCases(cookie: string, csrf: string): Case[] {
  const act = (action: string) => ({ method: 'POST', path: '/nodes/node-a/state', ...form(`csrf=${csrf}&action=${action}&confirm=yes&reason=r`, { cookie }) });
  return [
    ['a 20 KB login form', { method: 'POST', path: '/login', ...form(`token=${'x'.repeat(20_000)}`) }, 413],
    ['a login form of 2,000 fields', { method: 'POST', path: '/login', ...form(Array.from({ length: 2000 }, (_, i) => `f${i}=123456`).join('&')) }, 413],
    [
      'a login form in koi8-r',
      { method: 'POST', path: '/login', ...form('token=x', { 'content-type': 'application/x-www-form-urlencoded; charset=koi8-r' }) },
      415,
    ],
    ['a login form in bad gzip', { method: 'POST', path: '/login', ...form('token=x', { 'content-encoding': 'gzip' }) }, 400],
    ['__proto__ as an action', act('__proto__'), 400],
    ['constructor as an action', act('constructor'), 400],
    ['toString as an action', act('toString'), 400],
    // Without a session the body is not even read: a redirect to log in, never a 413.
    ['a 1 MB form without a session', { method: 'POST', path: '/nodes/node-a/state', ...form(`action=${'x'.repeat(1 << 20)}`) }, 303],
    ['bad %-escape in a model name', { path: '/models/%E0%A4%A', headers: { cookie } }, 400],
    ['an unknown method', { method: 'PUT', path: '/', headers: { cookie } }, 405],
    ['an unknown method on login', { method: 'DELETE', path: '/login' }, 405],
  ];
}

describe('hand-picked hostile requests (issue 13)', () => {
  let live: LiveServer;
  beforeAll(async () => {
    live = await liveServer();
  });
  afterAll(async () => {
    await live.close();
  });

  async function run(cases: Case[]) {
    const before = await live.state();
    const wrong: string[] = [];
    for (const [name, request, status, field] of cases) {
      const r = await send(live.admin, request);
      const got = r.headers['content-type']?.includes('json') ? (JSON.parse(r.body) as { field?: string }).field : undefined;
      if (r.status !== status || (field !== undefined && got !== field)) wrong.push(`${name}: ${r.status} ${got ?? ''} ${r.body.slice(0, 200)}`);
      if (status === 405 && !r.headers.allow) wrong.push(`${name}: 405 without Allow`);
    }
    expect(wrong).toEqual([]);
    expect(await live.state()).toBe(before);
    process.stdout.write(`hostile cases: ${cases.length} requests, all ${cases.length} answered as expected (4xx/303), 0 5xx, state unchanged\n`);
  }

  it('admin API', () => run(ADMIN_CASES));
  it('agent API: deep nesting, absurd sizes and numbers are refused before anything is stored', async () => {
    await run(AGENT_CASES);
    const nodes = await send(live.admin, { path: '/api/v1/nodes', headers: adminAuth });
    expect((JSON.parse(nodes.body) as { id: string }[]).map((n) => n.id)).toEqual(['node-a']);
  });
  it('dashboard', async () => {
    const { cookie, csrf } = await live.login();
    expect(csrf).not.toBe('');
    await run(dashboardCases(cookie, csrf));
  });
  it('lists the allowed methods in Allow', async () => {
    const r = await send(live.admin, { method: 'PUT', path: '/api/v1/keys', headers: adminAuth });
    expect([r.status, r.headers.allow]).toEqual([405, 'GET, POST, HEAD']);
  });
});
