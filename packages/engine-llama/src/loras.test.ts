import { describe, expect, it } from '@jest/globals';
import { LoraContexts } from './loras.js';
import type { LoraAdapter } from './options.js';

const adapters: LoraAdapter[] = ['a', 'b', 'c'].map((name) => ({ name, path: `/${name}.gguf` }));

/** Contexts whose creation the test releases by hand; each records what was created and disposed. */
function contexts(maxLoras: number) {
  const created: string[] = [];
  const disposed: string[] = [];
  const pending = new Map<string, { go: () => void; fail: (e: Error) => void }>();
  let manual = false;
  let onPending: (() => void) | undefined;
  /** Resolves once `name`'s creation is waiting to be released. */
  const creating = async (name: string) => {
    while (!pending.has(name)) await new Promise<void>((resolve) => (onPending = resolve));
    const p = pending.get(name)!;
    pending.delete(name);
    return p;
  };
  const loras = new LoraContexts<string>(
    adapters,
    maxLoras,
    (a) =>
      new Promise((resolve, reject) => {
        const go = () => {
          created.push(a.name);
          resolve({ slots: [`${a.name}-slot`], dispose: async () => void disposed.push(a.name) });
        };
        if (!manual) return go();
        pending.set(a.name, { go, fail: reject });
        onPending?.();
      }),
    () => {},
  );
  return { loras, created, disposed, creating, manual: () => (manual = true) };
}

describe('LoraContexts', () => {
  it('loads on first use, and unloads the least recently used one past maxLoras', async () => {
    const { loras, created, disposed } = contexts(2);
    for (const name of ['a', 'b', 'a']) (await loras.lease(name)).release();
    expect(loras.loadedNames()).toEqual(['b', 'a']);
    (await loras.lease('c')).release();
    expect(loras.loadedNames()).toEqual(['a', 'c']);
    await loras.close();
    expect(created).toEqual(['a', 'b', 'c']);
    expect(disposed).toEqual(['b', 'a', 'c']);
    expect(loras.counts).toEqual({ loads: 3, unloads: 1 });
  });

  it('never unloads an adapter a request holds; it goes once that request ends', async () => {
    const { loras, disposed } = contexts(1);
    const a = await loras.lease('a');
    const pool = await a.pool.acquire();
    expect(pool).toBe('a-slot');
    const b = await loras.lease('b');
    expect(loras.loadedNames()).toEqual(['a', 'b']);
    a.release();
    expect(loras.loadedNames()).toEqual(['b']);
    b.release();
    await loras.close();
    expect(disposed).toEqual(['a', 'b']);
  });

  it('loads once for requests that come while it loads, and tries again after a failed load', async () => {
    const c = contexts(2);
    c.manual();
    const first = c.loras.lease('a');
    const second = c.loras.lease('a');
    (await c.creating('a')).fail(new Error('bad file'));
    await expect(first).rejects.toThrow('bad file');
    await expect(second).rejects.toThrow('bad file');
    expect(c.loras.loadedNames()).toEqual([]);
    const third = c.loras.lease('a');
    (await c.creating('a')).go();
    (await third).release();
    expect(c.created).toEqual(['a']);
    expect(c.loras.loadedNames()).toEqual(['a']);
  });

  it('refuses a name it does not serve', async () => {
    await expect(contexts(1).loras.lease('z')).rejects.toThrow('no LoRA adapter z');
  });
});
