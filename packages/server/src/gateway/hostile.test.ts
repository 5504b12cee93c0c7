import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { closeAll, setup, sleep, type Upstream } from './testing.js';

// The gateway's hostile-input suite: generated client requests, and generated engine
// replies, against a gateway in process on real sockets. Whatever comes in: no 5xx but
// the documented 502/503 for engines that failed, the gateway still serving, usage
// unchanged by a refused request and never holding a bad count. Bounded: fixed runs.

/** Statuses a request may get from the gateway: anything below 500, and an engine's failure as 502/503. */
const allowed = (s: number) => s < 500 || s === 502 || s === 503;

interface Answer {
  status: number;
  text: string;
}

/** One request by raw node:http, so methods, headers and bodies go out as generated. */
function send(url: string, method: string, path: string, headers: Record<string, string>, body: Buffer | undefined): Promise<Answer> {
  return new Promise((resolve, reject) => {
    // A fresh connection each: a kept-alive one the server closed after a refusal would
    // turn the next request into a client-side reset, which is not what is tested.
    const req = http.request(`${url}${path}`, { method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, text }));
      res.on('error', () => resolve({ status: res.statusCode!, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Per surface: inputs tried and 5xx answers by status (each surface ends by checking /healthz). */
const figures: Record<string, { inputs: number; fiveXX: Record<number, number> }> = {};
const note = (surface: string, status: number) => {
  const f = (figures[surface] ??= { inputs: 0, fiveXX: {} });
  f.inputs++;
  if (status >= 500) f.fiveXX[status] = (f.fiveXX[status] ?? 0) + 1;
};

afterAll(async () => {
  await closeAll();
  console.info(`hostile-input figures (gateway): ${JSON.stringify(figures)}`);
});

/** The engine's next reply, set by each run of the engine-reply property. */
let plan: { status: number; stream: boolean; pieces: (string | Buffer)[]; end: boolean } = {
  status: 200,
  stream: false,
  pieces: ['{"id":"ok","choices":[]}'],
  end: true,
};
const engine: Upstream = (req, res) => {
  req.resume();
  req.on('end', () => {
    const p = plan;
    res.writeHead(p.status, { 'content-type': p.stream ? 'text/event-stream' : 'application/json' });
    res.flushHeaders();
    void (async () => {
      for (const piece of p.pieces) {
        if (res.destroyed) return;
        res.write(piece);
        await sleep(1);
      }
      if (p.end) res.end();
    })();
  });
};

let g: Awaited<ReturnType<typeof setup>>;
beforeAll(async () => {
  g = await setup(engine, {
    cooldownMs: 0,
    streamIdleTimeoutMs: 50,
    maxEventBytes: 4096,
    maxReplyBytes: 8192,
    maxBodyBytes: 64 * 1024,
    upstreamTimeoutMs: 1000,
  });
});

const usageTotals = async () => {
  await g.keys.flushUsage();
  return g.store.usage.reduce(
    (t, u) => ({ requests: t.requests + u.requests, prompt: t.prompt + u.promptTokens, completion: t.completion + u.completionTokens }),
    { requests: 0, prompt: 0, completion: 0 },
  );
};

const healthy = async () => expect((await send(g.url, 'GET', '/healthz', {}, undefined)).status).toBe(200);

const model = fc.oneof(
  fc.constant('m'),
  fc.string({ maxLength: 40 }),
  fc.constantFrom('x'.repeat(257), '__proto__', 'constructor', '', 'm\u0000', 'M'),
  fc.integer(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 2 }),
);
const jsonBody = fc.record(
  {
    model,
    messages: fc.oneof(fc.constant([]), fc.anything({ maxDepth: 2 })),
    stream: fc.oneof(fc.boolean(), fc.anything({ maxDepth: 1 })),
    stream_options: fc.anything({ maxDepth: 2 }),
    max_tokens: fc.oneof(fc.integer(), fc.double()),
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  jsonBody.map((b) => Buffer.from(JSON.stringify(b))),
  fc.string({ maxLength: 200 }).map((s) => Buffer.from(s)),
  fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)),
  fc.constantFrom('{"model":', '[]', 'null', '"m"', '{"model":"m","stream":true', '{"__proto__":{"model":"m"}}').map((s) => Buffer.from(s)),
  fc.constant(Buffer.alloc(70 * 1024, 0x61)),
);
const token = (t: string) => `data: {"choices":[{"index":0,"delta":{"content":${JSON.stringify(t)}}}]}\n\n`;

describe('hostile input to the gateway', () => {
  it('client requests: generated methods, paths, headers and bodies', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('POST', 'POST', 'POST', 'GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'PROPFIND'),
        fc.oneof(
          fc.constantFrom(
            '/v1/chat/completions',
            '/v1/completions',
            '/v1/embeddings',
            '/v1/models',
            '/healthz',
            '/v1/chat/completions?x=%zz',
            '//v1/../v1/models',
          ),
          fc.webPath(),
        ),
        fc.oneof(
          fc.constant('good'),
          fc.constant('none'),
          fc.string({ maxLength: 60 }).filter((s) => /^[\x20-\x7e]*$/.test(s)),
        ),
        fc.dictionary(
          fc.constantFrom('content-type', 'content-encoding', 'x-request-id', 'accept', 'transfer-encoding-x'),
          fc.string({ maxLength: 30 }).filter((s) => /^[\x20-\x7e]*$/.test(s)),
          { maxKeys: 3 },
        ),
        body,
        async (method, path, auth, extra, b) => {
          plan = { status: 200, stream: false, pieces: ['{"id":"ok","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}'], end: true };
          const headers: Record<string, string> = { ...extra };
          if (auth === 'good') headers.authorization = `Bearer ${g.secret}`;
          else if (auth !== 'none') headers.authorization = auth;
          const before = await usageTotals();
          const withBody = method !== 'GET' && method !== 'HEAD';
          const r = await send(g.url, method, path.startsWith('/') ? path : `/${path}`, headers, withBody ? b : undefined);
          note('client requests', r.status);
          expect(allowed(r.status)).toBe(true);
          if (r.status >= 400) expect(await usageTotals()).toEqual(before);
        },
      ),
      { numRuns: 300, seed: 13 },
    );
    await healthy();
  });

  it('engine replies: generated statuses, bodies, events and usage values', async () => {
    const usageValue = fc.oneof(
      fc.integer({ min: -5, max: 5 }),
      fc.constantFrom('1e999', '-1e999', '1.5', '"0abc"', 'true', 'null', '{}', '[]', '9007199254740993', '-0', '1e20'),
    );
    const usageText = fc.tuple(usageValue, usageValue).map(([p, c]) => `{"prompt_tokens":${p},"completion_tokens":${c}}`);
    const event = fc.oneof(
      fc.string({ maxLength: 10 }).map(token),
      usageText.map((u) => `data: {"choices":[],"usage":${u}}\n\n`),
      usageText.map((u) => `data: {"choices":null,"usage":${u}}\n\n`),
      fc.string({ maxLength: 80 }),
      fc.uint8Array({ maxLength: 80 }).map((a) => Buffer.from(a)),
      fc.constantFrom('data: [DONE]\n\n', ': keep-alive\n\n', 'data: {"choices":[]', '\n\n', `data: ${'x'.repeat(6000)}`, 'event: x\n'),
    );
    const reply = fc.oneof(
      fc.record({ status: fc.constant(200), stream: fc.constant(true), pieces: fc.array(event, { maxLength: 8 }), end: fc.boolean() }),
      fc.record({
        status: fc.constantFrom(200, 200, 400, 404, 429, 500, 502, 503),
        stream: fc.constant(false),
        pieces: fc.oneof(
          usageText.map((u) => [`{"id":"x","choices":[],"usage":${u}}`]),
          fc.array(fc.string({ maxLength: 50 }), { maxLength: 3 }),
          fc.constant(['{"id":"x","pad":"', 'y'.repeat(9000), '"}'] as string[]),
        ),
        end: fc.boolean(),
      }),
    );
    await fc.assert(
      fc.asyncProperty(reply, fc.boolean(), async (p, clientStreams) => {
        plan = p;
        const r = await send(
          g.url,
          'POST',
          '/v1/chat/completions',
          { authorization: `Bearer ${g.secret}` },
          Buffer.from(JSON.stringify({ model: 'm', stream: clientStreams, messages: [{ role: 'user', content: 'hi' }] })),
        );
        note('engine replies', r.status);
        expect(allowed(r.status)).toBe(true);
        const t = await usageTotals();
        expect([t.prompt, t.completion].every((n) => Number.isSafeInteger(n) && n >= 0)).toBe(true);
      }),
      { numRuns: 120, seed: 13 },
    );
    await healthy();
  });
});
