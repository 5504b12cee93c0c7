import { afterEach, describe, expect, it } from '@jest/globals';
import type { AddressInfo } from 'node:net';
import { FAULTS, type Fault } from './faults.js';
import { parseEngineArgs } from './options.js';
import { createEngineServer } from './server.js';

// The fault mode, in process: each kind's streamed and non-streamed reply.

const servers: { close(): void; closeAllConnections(): void }[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

async function engine(fault: Fault, extra: string[] = []): Promise<string> {
  const parsed = parseEngineArgs(['--port', '0', '--model', 'tiny', '--fault', fault, ...extra]);
  if (parsed.kind !== 'options') throw new Error(parsed.kind);
  const e = createEngineServer(parsed.options, { log: () => {}, onCrash: () => {} });
  e.markLoaded();
  await new Promise<void>((resolve) => e.server.listen(0, '127.0.0.1', resolve));
  servers.push(e.server);
  return `http://127.0.0.1:${(e.server.address() as AddressInfo).port}`;
}

const chat = (url: string, stream: boolean, signal?: AbortSignal) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({
      model: 'tiny',
      messages: [{ role: 'user', content: 'one two' }],
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    }),
    ...(signal ? { signal } : {}),
  });

describe('--fault', () => {
  it('refuses an unknown kind', () => {
    expect(parseEngineArgs(['--port', '0', '--model', 'tiny', '--fault', 'nope'])).toEqual({
      kind: 'error',
      message: `--fault must be one of ${FAULTS.join(', ')}, got 'nope'`,
    });
  });

  it.each([
    ['usage-negative', '-1'],
    ['usage-string', '"0abc"'],
    ['usage-huge', '1e20'],
    ['usage-nonfinite', '1e999'],
  ] as const)('%s sends usage counts of %s, streamed and not', async (fault, v) => {
    const url = await engine(fault);
    const want = `"usage":{"prompt_tokens":${v},"completion_tokens":${v},"total_tokens":${v}}`;
    const body = await (await chat(url, false)).text();
    expect(body).toContain(want);
    expect(body).toContain('"content":"echo: one two"');
    const stream = await (await chat(url, true)).text();
    expect(stream).toContain(`"choices":[],${want}`);
    expect(stream.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('oversized-event sends one content of --fault-bytes', async () => {
    const url = await engine('oversized-event', ['--fault-bytes', '100000']);
    const stream = await (await chat(url, true)).text();
    const big = stream.split('\n\n').find((e) => e.includes('xxxx'))!;
    expect(big).toContain(`"content":"${'x'.repeat(100_000)}"`);
    expect(await (await chat(url, false)).text()).toContain(`"content":"${'x'.repeat(100_000)}"`);
  });

  it('stall sends the headers of a stream, then nothing until the client leaves', async () => {
    const url = await engine('stall');
    const ac = new AbortController();
    const res = await chat(url, true, ac.signal);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const reader = res.body!.getReader();
    const next = reader.read().then(
      () => 'data',
      () => 'aborted',
    );
    const waited = await Promise.race([next, new Promise((r) => setTimeout(() => r('silent'), 200))]);
    expect(waited).toBe('silent');
    ac.abort();
    expect(await next).toBe('aborted');
  });

  it('garbage sends malformed events before the tokens, and a 200 that is not JSON', async () => {
    const url = await engine('garbage');
    const stream = await (await chat(url, true)).text();
    expect(stream.startsWith('data: {not json\n\n')).toBe(true);
    expect(stream).toContain('"content":"echo:"');
    const res = await chat(url, false);
    expect(res.status).toBe(200);
    await expect(res.json()).rejects.toThrow();
  });
});
