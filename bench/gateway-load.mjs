// The gateway's load shapes, shared by gateway.bench.mjs and gateway-store.bench.mjs:
// small chat completions one at a time (latency), 64 at once (throughput), and SSE
// streams, with the proxy's CPU time read from /proc around the throughput and SSE parts.
import { cpuSeconds } from './lib.mjs';

const body = JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4 });
const streamBody = JSON.stringify({ model: 'echo', stream: true, max_tokens: 400, min_tokens: 400, messages: [{ role: 'user', content: 'go' }] });

/** `n` requests one after another; their latencies in ms, sorted. */
export async function sequential(pool, key, n, bodyOf = () => body) {
  const lat = [];
  for (let i = 0; i < n; i++) {
    const b = bodyOf(i);
    const t = process.hrtime.bigint();
    const r = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: b,
    });
    const text = await r.body.text();
    if (r.statusCode !== 200) throw new Error(`status ${r.statusCode} ${text}`);
    lat.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return lat.sort((a, b) => a - b);
}

/** Requests/s with `c` requests always in flight for `ms`. */
export async function concurrent(pool, key, c, ms) {
  let done = 0;
  const end = Date.now() + ms;
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (Date.now() < end) {
        const r = await pool.request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body,
        });
        await r.body.text();
        done++;
      }
    }),
  );
  return done / (ms / 1000);
}

/** SSE events received over `c` streams at once, `n` streams each. */
export async function streams(pool, key, c, n) {
  let events = 0;
  await Promise.all(
    Array.from({ length: c }, async () => {
      for (let i = 0; i < n; i++) {
        const r = await pool.request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: streamBody,
        });
        for await (const chunk of r.body) events += (chunk.toString().match(/\n\n/g) ?? []).length;
      }
    }),
  );
  return events;
}

/**
 * Latency at c=1 (`n` after `warm` warm-up), throughput at c=64 for `ms`, SSE events/s
 * over 16 streams (`streamsEach` each); with `pid`, that process's CPU per request and per
 * SSE event. The defaults are gateway.bench.mjs's.
 */
export async function measure(name, pool, key, pid, { warm = 300, n = 2000, ms = 4000, streamsEach = 5 } = {}) {
  await sequential(pool, key, warm);
  const lat = await sequential(pool, key, n);
  const c0 = pid ? cpuSeconds(pid) : 0;
  const thr = await concurrent(pool, key, 64, ms);
  const cpu = pid ? cpuSeconds(pid) - c0 : NaN;
  const s0 = pid ? cpuSeconds(pid) : 0;
  const t0 = Date.now();
  const events = streamsEach ? await streams(pool, key, 16, streamsEach) : 0;
  const sCpu = pid ? cpuSeconds(pid) - s0 : NaN;
  return { name, lat, thr, perCpu: (thr * (ms / 1000)) / cpu, events: events / ((Date.now() - t0) / 1000), eventsPerCpu: events / sCpu };
}
