// The routing benchmark's workloads: deterministic request streams (a seeded PRNG), so
// both policies get exactly the same requests at the same offsets, and a streaming
// client that measures time to first token and reads the usage chunk's cached tokens.

/** mulberry32: a small seeded PRNG, so every run sends the same text at the same times. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'su', 'ta', 'ri', 'po', 'da', 've', 'zu', 'ho', 'ba', 'ce', 'fi', 'gu'];

/** `n` words of 2-3 syllables (about 5 characters with the space: near 4 characters a token). */
export function text(random, n) {
  const words = [];
  for (let i = 0; i < n; i++) {
    let w = '';
    const parts = 2 + Math.floor(random() * 2);
    for (let j = 0; j < parts; j++) w += SYLLABLES[Math.floor(random() * SYLLABLES.length)];
    words.push(w);
  }
  return words.join(' ');
}

/** Exponential gaps: Poisson arrivals at `rate` per second over `seconds`; offsets in ms. */
export function poisson(random, rate, seconds) {
  const at = [];
  for (let t = -Math.log(1 - random()) / rate; t < seconds; t += -Math.log(1 - random()) / rate) at.push(t * 1000);
  return at;
}

/**
 * (a) Shared prefixes: `groups` long system prompts, each request one of them (uniformly)
 * with a short question of its own, arriving as a Poisson stream. Returns [offset ms, messages].
 */
export function sharedPrefixes({ seed, groups, systemWords, questionWords, rate, seconds }) {
  const random = rng(seed);
  const systems = Array.from({ length: groups }, (_, g) => `group ${g}. ${text(rng(seed * 1000 + g), systemWords)}`);
  return poisson(random, rate, seconds).map((at) => [
    at,
    [
      { role: 'system', content: systems[Math.floor(random() * groups)] },
      { role: 'user', content: text(random, questionWords) },
    ],
  ]);
}

/** (c) No reuse: every prompt its own text from its first word. */
export function noReuse({ seed, promptWords, rate, seconds }) {
  const random = rng(seed);
  return poisson(random, rate, seconds).map((at, i) => [at, [{ role: 'user', content: `request ${i}. ${text(random, promptWords)}` }]]);
}

/**
 * One streamed chat completion: time to first token (the first non-empty content delta)
 * and the usage chunk. Never throws: a failure counts as an error in the table.
 */
export async function streamChat(pool, key, model, messages, maxTokens) {
  const t0 = performance.now();
  try {
    const res = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages, max_tokens: maxTokens, stream: true, stream_options: { include_usage: true } }),
    });
    if (res.statusCode !== 200) {
      await res.body.text();
      return { ok: false, error: `HTTP ${res.statusCode}` };
    }
    let buffer = '';
    let ttft;
    let usage;
    let reply = '';
    for await (const chunk of res.body) {
      buffer += chunk;
      let end;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!event.startsWith('data: {')) continue;
        const data = JSON.parse(event.slice(6));
        const content = data.choices?.[0]?.delta?.content;
        if (content) {
          ttft ??= performance.now() - t0;
          reply += content;
        }
        if (data.usage) usage = data.usage;
      }
    }
    return { ok: true, ttft: ttft ?? performance.now() - t0, done: performance.now() - t0, usage, reply };
  } catch (e) {
    return { ok: false, error: e.message };
  }
}

/** Sends `schedule` ([offset ms, messages]) open loop; resolves with every result and the wall time. */
export async function openLoop(pool, key, model, schedule, maxTokens) {
  const start = performance.now();
  const results = await Promise.all(
    schedule.map(async ([at, messages]) => {
      const wait = at - (performance.now() - start);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      return { ...(await streamChat(pool, key, model, messages, maxTokens)), sentAt: at };
    }),
  );
  return { results, seconds: (performance.now() - start) / 1000 };
}

/**
 * (b) Multi-turn chats: `conversations` users at once, each starting with a system prompt
 * and a question, then after an exponential think time appending the reply and a new
 * question, for `turns` turns, then starting a new conversation; closed loop for `seconds`.
 */
export async function multiTurn(pool, key, model, { seed, conversations, systemWords, questionWords, turns, thinkMs, seconds, maxTokens }) {
  const start = performance.now();
  const results = [];
  await Promise.all(
    Array.from({ length: conversations }, async (_, user) => {
      const random = rng(seed * 100 + user);
      for (let c = 0; performance.now() - start < seconds * 1000; c++) {
        const messages = [{ role: 'system', content: `user ${user} chat ${c}. ${text(random, systemWords)}` }];
        for (let t = 0; t < turns && performance.now() - start < seconds * 1000; t++) {
          await new Promise((r) => setTimeout(r, -Math.log(1 - random()) * thinkMs));
          messages.push({ role: 'user', content: text(random, questionWords) });
          const sentAt = performance.now() - start;
          const r = { ...(await streamChat(pool, key, model, messages, maxTokens)), sentAt };
          results.push(r);
          if (!r.ok) break;
          messages.push({ role: 'assistant', content: r.reply });
        }
      }
    }),
  );
  return { results, seconds: (performance.now() - start) / 1000 };
}

/**
 * TTFT p50/p90, cached share of prompt tokens, requests/s and prompt tokens/s of one run,
 * counting only requests sent after `warmupMs`: the steady state, not the caches filling.
 */
export function summarise({ results: all, seconds: total }, warmupMs = 0) {
  const results = all.filter((r) => r.sentAt >= warmupMs);
  const seconds = total - warmupMs / 1000;
  const ok = results.filter((r) => r.ok);
  const ttft = ok.map((r) => r.ttft).sort((a, b) => a - b);
  const pct = (p) => (ttft.length === 0 ? NaN : ttft[Math.min(ttft.length - 1, Math.floor((p / 100) * ttft.length))]);
  const prompt = ok.reduce((s, r) => s + (r.usage?.prompt_tokens ?? 0), 0);
  const cached = ok.reduce((s, r) => s + (r.usage?.prompt_tokens_details?.cached_tokens ?? 0), 0);
  return {
    n: results.length,
    errors: results.length - ok.length,
    p50: pct(50),
    p90: pct(90),
    cachedShare: prompt === 0 ? 0 : cached / prompt,
    rps: ok.length / seconds,
    promptTps: prompt / seconds,
    firstError: results.find((r) => !r.ok)?.error,
  };
}
