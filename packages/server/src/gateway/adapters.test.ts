import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from '@jest/globals';
import { closeAll, post, reply, setupFleet, type Upstream } from './testing.js';

afterEach(closeAll);

/** An engine that answers with its own number and the model name it was asked for. */
const engine =
  (n: number): Upstream =>
  (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const model = (JSON.parse(body) as { model: string }).model;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: `${n}:${model}` } }] }));
    });
  };
const said = (text: string) => (JSON.parse(text) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content;
const adapters = [
  { name: 'sql-lora', source: '/m/sql.gguf' },
  { name: 'chat-lora', source: '/m/chat.gguf' },
];

describe('LoRA adapters through the gateway', () => {
  it('serves an adapter on a replica of its base, asked for by the adapter name, and keeps it where it was loaded', async () => {
    const { url, secret, metrics } = await setupFleet([engine(1), engine(2)], { adapters });
    const first = said((await post(url, secret, { model: 'sql-lora', messages: [{ role: 'user', content: 'q' }] })).text);
    expect(first).toMatch(/^[12]:sql-lora$/);
    for (let i = 0; i < 5; i++) expect(said((await post(url, secret, { model: 'sql-lora', messages: [{ role: 'user', content: 'q' }] })).text)).toBe(first);
    // The base model is asked for by its own name.
    expect(said((await post(url, secret, { model: 'm', messages: [{ role: 'user', content: 'q' }] })).text)).toMatch(/^[12]:m$/);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/llmgw_adapter_loads_total\{model="m",adapter="sql-lora"\} 1\n/);
  });

  it("lets a key use the adapters its models name, and refuses the others with OpenAI's 403 shape", async () => {
    const { url, keys } = await setupFleet([engine(1)], { adapters });
    const { secret } = await keys.create({ name: 'sql-team', models: ['sql-lora'] }, (n) => n);
    expect((await post(url, secret, { model: 'sql-lora', messages: [{ role: 'user', content: 'q' }] })).status).toBe(200);
    for (const model of ['chat-lora', 'm']) {
      const r = await post(url, secret, { model, messages: [{ role: 'user', content: 'q' }] });
      expect({ model, status: r.status }).toEqual({ model, status: 403 });
      expect(reply(r.text).error.message).toContain(`may not use model \`${model}\``);
    }
  });
});
