import { describe, expect, it } from '@jest/globals';
import { BLOCK_BYTES, MAX_BLOCKS, promptBlocks } from './prefix.js';

const system = 'You are a careful assistant. '.repeat(40); // ~1,160 bytes, 18 blocks
const chat = (...messages: [string, unknown][]) => ({ model: 'm', messages: messages.map(([role, content]) => ({ role, content })) });
/** How many leading hashes two prompts share. */
const common = (a: Int32Array, b: Int32Array) => {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
};

describe('promptBlocks', () => {
  it('cuts the routing text into blocks of BLOCK_BYTES, the last one partial', () => {
    const p = promptBlocks({ prompt: 'x'.repeat(BLOCK_BYTES * 3 + 1) });
    expect(p.bytes).toBe(BLOCK_BYTES * 3 + 1);
    expect(p.hashes).toHaveLength(4);
  });

  it('reads a Responses API request as the chat it becomes: its prompt is counted and shares blocks with that chat (review of issue 29)', () => {
    const asChat = promptBlocks(chat(['system', system], ['user', 'What is the capital of France?']));
    const asText = promptBlocks({ model: 'm', instructions: system, input: 'What is the capital of France?' }, true);
    const asItems = promptBlocks(
      {
        model: 'm',
        instructions: system,
        input: [{ role: 'user', content: [{ type: 'input_text', text: 'What is the capital of France?' }] }],
      },
      true,
    );
    expect(asText.bytes).toBeGreaterThan(system.length);
    expect([...asText.hashes]).toEqual([...asChat.hashes]);
    expect(common(asItems.hashes, asChat.hashes)).toBeGreaterThanOrEqual(Math.floor(system.length / BLOCK_BYTES));
    expect(promptBlocks({ model: 'm', input: [] }, true).bytes).toBe(0);
    // An embedding's input is no prompt an engine caches.
    expect(promptBlocks({ model: 'm', input: 'What is the capital of France?' }).bytes).toBe(0);
  });

  it('gives two chats with the same system prompt the same leading hashes, and different ones after', () => {
    const a = promptBlocks(chat(['system', system], ['user', 'What is the capital of France?']));
    const b = promptBlocks(chat(['system', system], ['user', 'How do magnets work?']));
    const shared = common(a.hashes, b.hashes);
    // Every whole block of the system prompt; nothing after the questions diverge.
    expect(shared).toBe(Math.floor(Buffer.byteLength(`system\xff${system}\xff`, 'latin1') / BLOCK_BYTES));
    expect(shared).toBeLessThan(a.hashes.length);
  });

  it('chains: a change in the first block changes every hash after it', () => {
    const a = promptBlocks(chat(['system', system]));
    const b = promptBlocks(chat(['system', `Z${system.slice(1)}`]));
    expect(common(a.hashes, b.hashes)).toBe(0);
    expect(new Set([...a.hashes]).size).toBe(a.hashes.length);
  });

  it('matches a later turn of a chat on the whole earlier conversation', () => {
    const turn1 = chat(['system', system], ['user', 'Tell me about the sea. '.repeat(5)]);
    const turn2 = {
      ...turn1,
      messages: [...turn1.messages, { role: 'assistant', content: 'The sea is large. '.repeat(10) }, { role: 'user', content: 'And rivers?' }],
    };
    const a = promptBlocks(turn1);
    const b = promptBlocks(turn2);
    // All of turn 1 but its last, partial block.
    expect(common(a.hashes, b.hashes)).toBe(a.hashes.length - 1);
  });

  it('tells roles, message boundaries and trailing bytes apart', () => {
    const base = promptBlocks(chat(['user', 'ab'], ['user', 'c'])).hashes;
    expect(promptBlocks(chat(['user', 'a'], ['user', 'bc'])).hashes).not.toEqual(base);
    expect(promptBlocks(chat(['system', 'ab'], ['user', 'c'])).hashes).not.toEqual(base);
    expect(promptBlocks({ prompt: 'ab' }).hashes).not.toEqual(promptBlocks({ prompt: 'ab\u0000' }).hashes);
    // The same request again hashes the same (no state leaks from the scratch buffer).
    promptBlocks({ prompt: 'z'.repeat(1000) });
    expect(promptBlocks(chat(['user', 'ab'], ['user', 'c'])).hashes).toEqual(base);
  });

  it('reads text parts of a message and strings of a prompt', () => {
    const parts = promptBlocks(
      chat([
        'user',
        [
          { type: 'text', text: system },
          { type: 'image_url', image_url: { url: 'x' } },
        ],
      ]),
    );
    expect(common(parts.hashes, promptBlocks(chat(['user', [{ type: 'text', text: system }]])).hashes)).toBeGreaterThan(10);
    expect(promptBlocks({ prompt: [system] }).hashes.length).toBeGreaterThan(10);
  });

  it('hashes a long first message once and gives the same hashes from memory as from scratch', () => {
    const long = `${'Follow the style guide to the letter. '.repeat(200)}${Math.random()}`; // ~7,600 bytes, new to the memory
    const cold = promptBlocks(chat(['system', long], ['user', 'q1']));
    promptBlocks({ prompt: 'z'.repeat(long.length + 200) }); // other bytes where the first lay
    const hot = promptBlocks(chat(['system', long], ['user', 'q1']));
    expect(hot.hashes).toEqual(cold.hashes);
    const other = promptBlocks(chat(['system', long], ['user', 'a different question']));
    expect(common(cold.hashes, other.hashes)).toBe(Math.floor(Buffer.byteLength(`system\xff${long}\xff`, 'latin1') / BLOCK_BYTES));
    // The same text under another role is another prompt from its first block on.
    expect(common(promptBlocks(chat(['user', long], ['user', 'q1'])).hashes, cold.hashes)).toBe(0);
  });

  it('has no routing text for embeddings or a malformed body, and caps a huge prompt', () => {
    expect(promptBlocks({ input: 'hello' }).hashes).toHaveLength(0);
    expect(promptBlocks({ messages: [null, 3, { role: 7 }] }).hashes.length).toBeLessThanOrEqual(1);
    expect(promptBlocks({ prompt: 'é'.repeat(MAX_BLOCKS * BLOCK_BYTES) }).hashes).toHaveLength(MAX_BLOCKS);
  });
});
