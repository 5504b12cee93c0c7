import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { writeTestLora, writeTestModel } from '@llmgw/gguf';
import { getLlama, LlamaCompletion, type Llama, type LlamaModel } from 'node-llama-cpp';

// Issue 31: a real LoRA GGUF adapter on the CPU. The adapter `@llmgw/gguf` writes for its
// test model is loaded by llama.cpp as llama.cpp's own converter's output would be, and it
// changes what the model says: greedy output differs with it and is the base's without it.
describe('the test LoRA adapter in llama.cpp', () => {
  let dir: string;
  let llama: Llama;
  let model: LlamaModel;
  let adapter: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmgw-lora-'));
    const base = writeTestModel(path.join(dir, 'tiny.gguf'), { seed: 3 });
    adapter = writeTestLora(path.join(dir, 'tiny-lora.gguf')).path;
    // One thread: llama.cpp's worker threads spin, and on a loaded machine more of them only wait on each other.
    llama = await getLlama({ gpu: false, build: 'never', skipDownload: true, progressLogs: false, maxThreads: 1 });
    model = await llama.loadModel({ modelPath: base.path });
  });
  afterAll(async () => {
    await model?.dispose();
    await llama?.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const greedy = async (lora?: string): Promise<string> => {
    const context = await model.createContext({ contextSize: 256, threads: 1, ...(lora ? { lora: { adapters: [{ filePath: lora }] } } : {}) });
    try {
      const completion = new LlamaCompletion({ contextSequence: context.getSequence() });
      return await completion.generateCompletion('hello there', { maxTokens: 24, temperature: 0 });
    } finally {
      await context.dispose();
    }
  };

  it('changes the greedy output, and the base model without it says what it said before', async () => {
    const before = await greedy();
    const withAdapter = await greedy(adapter);
    const after = await greedy();
    expect(before.length).toBeGreaterThan(0);
    expect(withAdapter.length).toBeGreaterThan(0);
    expect(withAdapter).not.toBe(before);
    expect(after).toBe(before);
    // Still the test model's printable ASCII: the adapter leaves its guard alone.
    expect(withAdapter).toMatch(/^[\x20-\x7e]*$/);
  });

  it('is refused by llama.cpp when the file is cut short', async () => {
    const wrong = path.join(dir, 'wrong.gguf');
    fs.writeFileSync(wrong, fs.readFileSync(adapter).subarray(0, 200));
    await expect(model.createContext({ contextSize: 256, threads: 1, lora: { adapters: [{ filePath: wrong }] } })).rejects.toThrow();
  });
});
