import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { callAll, resolveConnection } from './client.js';

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A fake admin API that pages `ids` two at a time, as `GET /api/v1/nodes` does (X-Next-Cursor, ?after=). */
async function paged(ids: string[]): Promise<{ url: string; asked: string[] }> {
  const asked: string[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    asked.push(`${url.pathname}${url.search}`);
    const after = url.searchParams.get('after');
    const from = after === null ? 0 : ids.indexOf(after) + 1;
    const page = ids.slice(from, from + 2);
    if (from + 2 < ids.length) res.setHeader('X-Next-Cursor', page.at(-1)!);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(page.map((id) => ({ id }))));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, asked };
}

describe('callAll', () => {
  it('follows X-Next-Cursor until a page gives none, and asks for each page once', async () => {
    const s = await paged(['a', 'b', 'c', 'd', 'e']);
    const all = await callAll<{ id: string }>(resolveConnection({ server: s.url, token: 't' }), '/nodes');
    expect(all.map((n) => n.id)).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(s.asked).toEqual(['/api/v1/nodes', '/api/v1/nodes?after=b', '/api/v1/nodes?after=d']);
  });

  it('asks once for a list that fits one page', async () => {
    const s = await paged(['a']);
    expect(await callAll(resolveConnection({ server: s.url, token: 't' }), '/nodes')).toEqual([{ id: 'a' }]);
    expect(s.asked).toEqual(['/api/v1/nodes']);
  });
});
