import { afterEach, describe, expect, it } from '@jest/globals';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CatalogError, CatalogWatcher, type LoadedCatalog } from './catalog.js';
import { yaml } from './testing.js';

describe('CatalogWatcher', () => {
  const catalogText = (...names: string[]) =>
    yaml('models:', ...names.map((n) => `  - {name: ${n}, source: org/${n}, profiles: [{name: cpu, engine: llama.cpp}]}`));

  let dir: string | undefined;
  let watcher: CatalogWatcher | undefined;
  afterEach(async () => {
    watcher?.close();
    watcher = undefined;
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  async function setUp(options: { pollMs?: number; fsWatch?: boolean } = {}) {
    dir = await mkdtemp(join(tmpdir(), 'llmgw-catalog-'));
    const file = join(dir, 'catalog.yaml');
    await writeFile(file, catalogText('a'));
    const changes: LoadedCatalog[] = [];
    const errors: CatalogError[] = [];
    watcher = await CatalogWatcher.start(file, {
      onChange: (c) => changes.push(c),
      onError: (e) => errors.push(e),
      ...options,
    });
    return { file, changes, errors, watcher };
  }

  async function waitFor(what: string, condition: () => boolean, timeoutMs = 1000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  const names = (c: LoadedCatalog | undefined) => c?.models.map((m) => m.name);

  it('reloads on change, keeps the running catalog through a broken edit, and recovers', async () => {
    const { file, changes, errors, watcher } = await setUp();
    expect(names(watcher.current)).toEqual(['a']);

    await writeFile(file, catalogText('a', 'b'));
    await waitFor('the first change', () => changes.length === 1);
    expect(names(changes[0])).toEqual(['a', 'b']);
    expect(watcher.current).toBe(changes[0]);

    await writeFile(file, catalogText('a', 'b') + '  - {name: c, source: org/c, profiles: []}\n');
    await waitFor('the error', () => errors.length === 1);
    expect(errors[0]!.message).toBe(`catalog ${file}: model "c" (line 4): profiles must NOT have fewer than 1 items`);
    expect(names(watcher.current)).toEqual(['a', 'b']);
    expect(changes).toHaveLength(1);

    await writeFile(file, catalogText('a', 'b', 'c'));
    await waitFor('the fix', () => changes.length === 2);
    expect(names(changes[1])).toEqual(['a', 'b', 'c']);
    expect(names(watcher.current)).toEqual(['a', 'b', 'c']);
    expect(errors).toHaveLength(1);
  });

  it('sees a file replaced by rename, as editors and config management do', async () => {
    const { file, changes } = await setUp({ pollMs: 0 });
    const temp = `${file}.tmp`;
    await writeFile(temp, catalogText('renamed'));
    await rename(temp, file);
    await waitFor('the change', () => changes.length === 1);
    expect(names(changes[0])).toEqual(['renamed']);
  });

  it('falls back on polling when fs.watch is not available', async () => {
    const { file, changes } = await setUp({ fsWatch: false, pollMs: 50 });
    await writeFile(file, catalogText('a', 'polled'));
    await waitFor('the change', () => changes.length === 1);
    expect(names(changes[0])).toEqual(['a', 'polled']);
  });

  it('reload() reports whether anything changed and ignores edits that change no model', async () => {
    const { file, changes, errors, watcher } = await setUp({ fsWatch: false, pollMs: 0 });
    await expect(watcher.reload()).resolves.toBe(false);

    await writeFile(file, '# a comment\n' + catalogText('a'));
    await expect(watcher.reload()).resolves.toBe(false);

    await writeFile(file, catalogText('a', 'b'));
    await expect(watcher.reload()).resolves.toBe(true);
    expect(names(changes[0])).toEqual(['a', 'b']);

    // Every explicit reload of a broken file answers, unlike repeated file events.
    await writeFile(file, 'models: [\n');
    await expect(watcher.reload()).resolves.toBe(false);
    await expect(watcher.reload()).resolves.toBe(false);
    expect(errors.map((e) => e.line)).toEqual([1, 1]);
    expect(errors[0]!.message).toMatch(new RegExp(`^catalog ${file} \\(line 1\\): YAML syntax error: `));
    expect(names(watcher.current)).toEqual(['a', 'b']);
    expect(changes).toHaveLength(1);
  });

  it('keeps the latest failure until a reload succeeds, and says when a fix changed nothing', async () => {
    dir = await mkdtemp(join(tmpdir(), 'llmgw-catalog-'));
    const file = join(dir, 'catalog.yaml');
    await writeFile(file, catalogText('a'));
    let clock = 1000;
    const recovered: LoadedCatalog[] = [];
    const changes: LoadedCatalog[] = [];
    watcher = await CatalogWatcher.start(file, {
      onChange: (c) => changes.push(c),
      onError: () => undefined,
      onRecover: (c) => recovered.push(c),
      now: () => clock,
      fsWatch: false,
      pollMs: 0,
    });
    expect(watcher.loadedAtMs).toBe(1000);
    expect(watcher.failure).toBeUndefined();

    clock = 2000;
    await writeFile(file, 'models:\n  - name: a\n');
    await watcher.reload();
    expect(watcher.failure?.atMs).toBe(2000);
    expect(watcher.failure?.error.lines()).toEqual([
      `catalog ${file}: model "a" (line 2): source is required`,
      `catalog ${file}: model "a" (line 2): profiles is required`,
    ]);

    // Putting back what runs ends the failure, with nothing to apply.
    clock = 3000;
    await writeFile(file, catalogText('a'));
    await expect(watcher.reload()).resolves.toBe(false);
    expect(watcher.failure).toBeUndefined();
    expect(recovered.map(names)).toEqual([['a']]);
    expect(watcher.loadedAtMs).toBe(1000);

    // A fix that changes the models is an onChange, not also an onRecover.
    await writeFile(file, 'models: [\n');
    await watcher.reload();
    clock = 4000;
    await writeFile(file, catalogText('a', 'b'));
    await expect(watcher.reload()).resolves.toBe(true);
    expect(watcher.failure).toBeUndefined();
    expect(watcher.loadedAtMs).toBe(4000);
    expect(changes.map(names)).toEqual([['a', 'b']]);
    expect(recovered).toHaveLength(1);
  });

  it('reports a deleted file once and keeps the catalog', async () => {
    const { file, errors, watcher } = await setUp({ pollMs: 50 });
    await rm(file);
    await waitFor('the error', () => errors.length === 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toMatch(new RegExp(`^catalog ${file}: cannot be read: ENOENT`));
    expect(names(watcher.current)).toEqual(['a']);
  });

  it('refuses to start on a broken catalog', async () => {
    dir = await mkdtemp(join(tmpdir(), 'llmgw-catalog-'));
    const file = join(dir, 'catalog.yaml');
    await writeFile(file, 'models:\n  - name: a\n');
    const started = CatalogWatcher.start(file, { onChange: () => undefined, onError: () => undefined });
    await expect(started).rejects.toThrow(`catalog ${file}: model "a" (line 2): source is required`);
  });

  it('stops after close()', async () => {
    const { file, changes, watcher } = await setUp({ pollMs: 50 });
    watcher.close();
    await writeFile(file, catalogText('a', 'late'));
    await new Promise((r) => setTimeout(r, 300));
    expect(changes).toHaveLength(0);
    await expect(watcher.reload()).resolves.toBe(false);
    expect(names(watcher.current)).toEqual(['a']);
  });
});
