import { afterEach, describe, expect, it } from '@jest/globals';
import type { AddressInfo } from 'node:net';
import { AdapterSlots, parseLoras, repeatedValues } from './adapters.js';
import { HELP_TEXT, parseEngineArgs } from './options.js';
import { createEngineServer } from './server.js';

const adapters = (...names: string[]) => names.map((name) => ({ name, path: `/a/${name}` }));

describe('--lora on the command line', () => {
  it('takes repeated flags and comma-joined lists alike, in order', () => {
    const argv = ['--port', '0', '--model', 'base', '--lora', 'a=/a/a,b=/a/b', '--lora=c=/a/c'];
    expect(repeatedValues(argv, '--lora')).toEqual(['a=/a/a,b=/a/b', 'c=/a/c']);
    expect(parseEngineArgs(argv)).toMatchObject({ kind: 'options', options: { loras: adapters('a', 'b', 'c') } });
    // The agent's `{adapters}` of a model without adapters is empty: no adapters, no error.
    expect(parseLoras([''], 'base')).toEqual([]);
  });

  it('lists the flags in --help under their own section', () => {
    expect(HELP_TEXT).toContain('LoRA adapters');
    for (const flag of ['--lora NAME=PATH', '--max-loras N', '--lora-load-ms MS']) expect(HELP_TEXT).toContain(flag);
  });
});

describe('AdapterSlots', () => {
  it('loads an adapter once, and evicts the least recently used when the slots are full', async () => {
    const slots = new AdapterSlots(adapters('a', 'b', 'c'), 2, 0);
    expect(await slots.use('a')).toEqual({ loaded: true });
    expect(await slots.use('b')).toEqual({ loaded: true });
    expect(await slots.use('a')).toEqual({ loaded: false });
    // b is the least recently used now.
    expect(await slots.use('c')).toEqual({ loaded: true, evicted: 'b' });
    expect(slots.loaded()).toEqual(['a', 'c']);
    // Evicted, it is loaded again: never refused.
    expect(await slots.use('b')).toEqual({ loaded: true, evicted: 'a' });
    expect(Object.fromEntries(slots.loads)).toEqual({ a: 1, b: 2, c: 1 });
    expect(Object.fromEntries(slots.evictions)).toEqual({ a: 1, b: 1 });
    expect(slots.metrics()).toContain('llmgw_test_engine_adapter_loads_total{adapter="b"} 2');
    expect(slots.metrics()).toContain('llmgw_test_engine_adapter_loaded{adapter="c"} 1');
  });

  it('makes a request wait for the load, and the requests that come meanwhile wait for the same load', async () => {
    const slots = new AdapterSlots(adapters('a'), 1, 40);
    const t0 = performance.now();
    const [first, second] = await Promise.all([slots.use('a'), slots.use('a')]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(35);
    expect([first, second]).toEqual([{ loaded: true }, { loaded: false }]);
    expect(slots.loads.get('a')).toBe(1);
    // Loaded: no wait.
    const t1 = performance.now();
    await slots.use('a');
    expect(performance.now() - t1).toBeLessThan(35);
  });

  it('stops waiting for a load when the request is cancelled', async () => {
    const slots = new AdapterSlots(adapters('a'), 1, 60_000);
    const ac = new AbortController();
    const use = slots.use('a', ac.signal);
    ac.abort();
    expect(await use).toEqual({ loaded: true });
  });
});

const servers: { close(): void; closeAllConnections(): void }[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

async function engine(extra: string[]): Promise<{ url: string; log: string[] }> {
  const parsed = parseEngineArgs(['--port', '0', '--model', 'base', ...extra]);
  if (parsed.kind !== 'options') throw new Error(parsed.kind === 'error' ? parsed.message : parsed.kind);
  const log: string[] = [];
  const e = createEngineServer(parsed.options, { log: (l) => log.push(l), onCrash: () => {} });
  e.markLoaded();
  await new Promise<void>((resolve) => e.server.listen(0, '127.0.0.1', resolve));
  servers.push(e.server);
  return { url: `http://127.0.0.1:${(e.server.address() as AddressInfo).port}`, log };
}

const chat = async (url: string, model: string, stream = false) => {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'one two' }], stream }),
  });
  return { status: res.status, text: await res.text() };
};

describe('the test engine serving adapters', () => {
  it('answers a request for an adapter as that adapter, and the base as itself', async () => {
    const { url, log } = await engine(['--lora', 'sql=/a/sql,law=/a/law', '--max-loras', '1']);
    const sql = JSON.parse((await chat(url, 'sql')).text) as { model: string; choices: Array<{ message: { content: string } }> };
    expect(sql.model).toBe('sql');
    expect(sql.choices[0]?.message.content).toBe('echo(sql): one two');
    const base = JSON.parse((await chat(url, 'base')).text) as { model: string; choices: Array<{ message: { content: string } }> };
    expect(base).toMatchObject({ model: 'base', choices: [{ message: { content: 'echo: one two' } }] });
    // Streamed, and a text completion, name it too.
    const streamed = await chat(url, 'law', true);
    expect(streamed.text).toContain('"model":"law"');
    expect(streamed.text).toContain('echo(law):');
    const cmpl = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'sql', prompt: 'x' }) });
    expect(await cmpl.json()).toMatchObject({ model: 'sql', choices: [{ text: 'echo(sql): x' }] });
    // One slot: sql, law, then sql again, each a load.
    expect(log.filter((l) => l.startsWith('loaded adapter'))).toEqual([
      'loaded adapter sql',
      'loaded adapter law, evicted sql',
      'loaded adapter sql, evicted law',
    ]);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toContain('llmgw_test_engine_adapter_loads_total{adapter="sql"} 2');
    expect(metrics).toContain('llmgw_test_engine_adapter_loaded{adapter="sql"} 1');
  });

  it("refuses a name that is neither the model nor an adapter with OpenAI's 404", async () => {
    const { url } = await engine(['--lora', 'sql=/a/sql']);
    const r = await chat(url, 'nosuch');
    expect(r.status).toBe(404);
    expect(JSON.parse(r.text)).toMatchObject({ error: { code: 'model_not_found', param: 'model', message: expect.stringContaining('nosuch') } });
  });

  it('has no /metrics without adapters, as before', async () => {
    const { url } = await engine([]);
    expect((await fetch(`${url}/metrics`)).status).toBe(404);
  });
});
