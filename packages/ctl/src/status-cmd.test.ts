import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { StatusView } from '@llmgw/shared';
import { catalogMismatch, localTime, statusLine } from './status-view.js';

/** The built ctl (turbo builds it before `test`), run as an operator runs it. */
const CLI = new URL('../dist/cli.js', import.meta.url).pathname;

const ago = (s: number) => new Date(Math.floor(Date.now() / 1000) * 1000 - s * 1000).toISOString();
/** What the operator's clock shows for `iso`: the subprocess runs with TZ=UTC. */
const utc = (iso: string) => iso.slice(0, 19).replace('T', ' ');

const solo = (): StatusView => ({
  store: 'sqlite',
  instance: 'gw-1',
  leader: { instance: 'gw-1', epoch: 0, since: ago(7200) },
  instances: [
    {
      id: 'gw-1',
      admin_url: 'https://127.0.0.1:8081',
      client_url: 'http://127.0.0.1:8080',
      started: ago(7200),
      last_seen_s: 0,
      leader: true,
      self: true,
      version: '0.1.0',
      catalog: { digest: '0123456789abcdef0123', models: 2 },
    },
  ],
});

const cluster = (): StatusView => ({
  store: 'postgres',
  instance: 'a',
  leader: { instance: 'b', epoch: 7, since: ago(125) },
  instances: [
    {
      id: 'a',
      admin_url: 'https://a:8081',
      client_url: 'http://a:8080',
      started: ago(3 * 3600),
      last_seen_s: 0,
      leader: false,
      self: true,
      version: '0.1.0',
      catalog: { digest: '0123456789abcdef0123', models: 2 },
    },
    {
      id: 'b',
      admin_url: 'https://b:8081',
      started: ago(130),
      last_seen_s: 1,
      leader: true,
      self: false,
      catalog: { digest: '0123456789abcdef0123', models: 1, error: 'models[1].name:\n  is missing' },
    },
  ],
});

const noLeader = (): StatusView => {
  const v = cluster();
  v.leader = { epoch: 7 };
  for (const i of v.instances) i.leader = false;
  return v;
};

describe('ctl status against a real HTTP server', () => {
  let answer: { status: number; body: unknown } = { status: 200, body: solo() };
  const seen: string[] = [];
  const srv = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url} ${req.headers.authorization}`);
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body));
  });
  let url = '';
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-ctl-status-'));
  beforeAll(async () => {
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => srv.close(r));
    fs.rmSync(home, { recursive: true, force: true });
  });

  const ctl = (...args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [CLI, ...args],
        { env: { PATH: process.env.PATH, HOME: home, LLMGW_HOME: home, LLMGW_SERVER: url, LLMGW_ADMIN_TOKEN: 'tok', NO_COLOR: '1', TZ: 'UTC' } },
        (err, stdout, stderr) => {
          resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr });
        },
      );
    });
  /** The line above the table, then the table's rows cut at its header's column starts (an empty cell stays ''). */
  const cells = (text: string) => {
    const [line = '', head = '', ...rows] = text.trimEnd().split('\n');
    const starts = [...head.matchAll(/(?:^|\s{2})(\S)/g)].map((m) => m.index + m[0].length - 1);
    const cut = (l: string) => starts.map((s, k) => l.slice(s, starts[k + 1]).trim());
    return [[line], cut(head), ...rows.map(cut)];
  };

  it('sqlite: one line for the store, then the one instance, leader and answering', async () => {
    answer = { status: 200, body: solo() };
    const r = await ctl('status');
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(seen.at(-1)).toBe('GET /api/v1/status Bearer tok');
    expect(cells(r.stdout)).toEqual([
      ['Store: sqlite (one instance)'],
      ['ID', 'ADMIN URL', 'CLIENT URL', 'LEADER', 'AGE', 'LAST SEEN', 'CATALOG', 'VERSION'],
      ['gw-1 (answering)', 'https://127.0.0.1:8081', 'http://127.0.0.1:8080', '*', '2h', '0s', '0123456789ab (2 models)', '0.1.0'],
    ]);
  });

  it('postgres: the leader, its epoch and since when in local time, then every instance with its catalog or the reload that failed', async () => {
    const v = cluster();
    answer = { status: 200, body: v };
    const r = await ctl('status');
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(cells(r.stdout)).toEqual([
      [`Store: postgres · leader b (epoch 7) since ${utc(v.leader.since!)} (2m ago)`],
      ['ID', 'ADMIN URL', 'CLIENT URL', 'LEADER', 'AGE', 'LAST SEEN', 'CATALOG', 'VERSION'],
      ['a (answering)', 'https://a:8081', 'http://a:8080', '', '3h', '0s', '0123456789ab (2 models)', '0.1.0'],
      ['b', 'https://b:8081', '-', '*', '2m', '1s', '0123456789ab (1 model), reload failed: models[1].name: | is missing', '-'],
    ]);
  });

  it('no leader: says so plainly, and still lists the instances, none marked', async () => {
    answer = { status: 200, body: noLeader() };
    const r = await ctl('status');
    expect(r.code).toBe(0);
    const [line, , ...rows] = r.stdout.trimEnd().split('\n');
    expect(line).toMatch(/^Store: postgres · no leader: no instance holds the lease \(last epoch 7\) — /);
    expect(rows.map((l) => l.split(/\s{2,}/)[0])).toEqual(['a (answering)', 'b']);
    expect(rows.some((l) => l.includes('*'))).toBe(false);
  });

  it('-o json prints the view as the server gave it', async () => {
    for (const v of [solo(), cluster(), noLeader()]) {
      answer = { status: 200, body: v };
      const r = await ctl('status', '-o', 'json');
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual(v);
    }
  });

  it('a server older than GET /api/v1/status: one line saying so, exit 1', async () => {
    answer = { status: 404, body: { error: 'no route GET /api/v1/status' } };
    const r = await ctl('status');
    expect(r).toEqual({
      code: 1,
      stdout: '',
      stderr: `error: ${url} predates GET /api/v1/status: it is one instance on SQLite, its own leader (ctl version shows its version)\n`,
    });
  });

  it('has help with examples', async () => {
    const r = await ctl('status', '--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Examples:\n  $ ctl status\n');
  });
});

describe('status rendering', () => {
  it('gives the leader line in local time with its age, and a leader without since alone', () => {
    const v = cluster();
    const now = new Date(Date.parse(v.leader.since!) + 45_000);
    expect(statusLine(v, now)).toBe(`Store: postgres · leader b (epoch 7) since ${localTime(new Date(v.leader.since!))} (45s ago)`);
    // A leader's clock ahead of ours is "0s ago", never negative.
    expect(statusLine(v, new Date(Date.parse(v.leader.since!) - 5000))).toMatch(/\(0s ago\)$/);
    v.leader = { instance: 'b', epoch: 7 };
    expect(statusLine(v, now)).toBe('Store: postgres · leader b (epoch 7)');
  });

  it('says when the instances serve different catalogs, and nothing when they agree', () => {
    const v = cluster();
    expect(catalogMismatch(v)).toBe('');
    v.instances[1]!.catalog = { digest: 'fedcba9876543210', models: 1 };
    expect(catalogMismatch(v)).toBe('The instances serve different catalogs (a: 0123456789ab, b: fedcba987654): give them the same catalog file.');
  });
});
