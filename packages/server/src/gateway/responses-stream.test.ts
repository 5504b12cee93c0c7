import { describe, expect, it } from '@jest/globals';
import { ResponsesTranslation } from './responses.js';
import type { EngineBody } from './sse.js';

type Obj = Record<string, unknown>;

/** An engine body that yields exactly these chunks, in order: no socket to coalesce them. */
function body(chunks: Buffer[]): EngineBody & { destroyed?: Error } {
  const b = {
    async *[Symbol.asyncIterator]() {
      for (const c of chunks) yield c;
    },
    destroy(err?: Error) {
      b.destroyed = err;
    },
  } as EngineBody & { destroyed?: Error };
  return b;
}

async function translate(chunks: Buffer[], maxEventBytes = 1 << 20): Promise<Obj[]> {
  const out: string[] = [];
  for await (const c of new ResponsesTranslation({ model: 'm', input: 'x', stream: true }).stream(body(chunks), maxEventBytes)) out.push(c.toString('utf8'));
  return out
    .join('')
    .split('\n\n')
    .filter((e) => e.includes('data: '))
    .map((e) => JSON.parse(e.slice(e.indexOf('data: ') + 6)) as Obj);
}

const chunk = (content: string) => `data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

describe('a translated stream, chunk by chunk (review of issue 29)', () => {
  it('reads a character split between two chunks whole', async () => {
    const bytes = Buffer.from(chunk('é…'));
    const at = bytes.indexOf(Buffer.from('…')) + 1; // inside the three bytes of '…'
    const events = await translate([bytes.subarray(0, at), bytes.subarray(at), Buffer.from('data: [DONE]\n\n')]);
    expect(events.find((e) => e.type === 'response.output_text.done')).toMatchObject({ text: 'é…' });
  });

  it('ends with an error when the engine sends an event past the bound without ending it, holding no more than the bound', async () => {
    const big = Buffer.alloc(64 * 1024, 'a');
    const chunks = [Buffer.from('data: {"x":"'), ...Array.from({ length: 40 }, () => big)];
    await expect(translate(chunks, 1 << 20)).rejects.toThrow('the engine sent an event over 1048576 bytes');
    // Under the bound, the same shape of stream is read to its end.
    await expect(translate([Buffer.from('data: {"x":"'), big, Buffer.from('"}\n\n')], 1 << 20)).resolves.toBeDefined();
  });
});
