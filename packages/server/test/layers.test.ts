import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
// @ts-expect-error -- plain JavaScript (the lint reads it), no declarations.
import { SERVER_LAYERS } from '../layers.js';

/**
 * The lint's folder rule (eslint.config.js, from the rows of layers.js): each folder
 * imports only the layers below its own. Shown on files the lint reads as if they were
 * in the tree, through the repository's own config.
 */
const PACKAGE = fileURLToPath(new URL('..', import.meta.url));
const ROOT = path.resolve(PACKAGE, '../..');
const layers = SERVER_LAYERS as string[][];

async function lint(cases: { file: string; code: string }[]): Promise<string[][]> {
  const { stdout } = await promisify(execFile)(process.execPath, [path.join(PACKAGE, 'test/lint-imports.mjs'), JSON.stringify(cases)], { cwd: ROOT });
  return JSON.parse(stdout) as string[][];
}

const at = (file: string, code: string) => ({ file: `packages/server/${file}`, code });

describe('the layer rule', () => {
  it('refuses an upward import, a peer import and either half of a cycle upward, and passes a downward import', async () => {
    const [up, peer, cycleDown, cycleUp, down, test, topTest] = await lint([
      at('src/store/layer-fixture.ts', "import { startServer } from '../server.js';\nexport const s = startServer;\n"),
      at('src/files/layer-fixture.ts', "import type { Store } from '../store/store.js';\nexport type S = Store;\n"),
      // A cycle of two folders: api/ → events/ is downward, so only its other half fails.
      at('src/api/layer-fixture.ts', "import type { EventLog } from '../events/event-log.js';\nexport type E = EventLog;\n"),
      at('src/events/layer-fixture.ts', "import type { Write } from '../api/routes.js';\nexport type W = Write;\n"),
      at(
        'src/gateway/layer-fixture.ts',
        "import { DomainError } from '../errors.js';\nimport { methodNotAllowed } from '../http/http.js';\nexport const x = [DomainError, methodNotAllowed];\n",
      ),
      // A folder's tests are in its layer; a low test helper is below the folders using it.
      at('src/placement/layer-fixture.test.ts', "import { liveServer } from '../../test/live-server.js';\nexport const l = liveServer;\n"),
      at(
        'test/layer-fixture.test.ts',
        "import { makeNode } from './factories.js';\nimport { startServer } from '../src/server.js';\nexport const x = [makeNode, startServer];\n",
      ),
    ]);
    expect(up).toEqual([expect.stringContaining('src/store imports only the layers below its own (packages/server/layers.js)')]);
    expect(up?.[0]).toContain('../server.js');
    expect(peer).toHaveLength(1);
    expect(cycleDown).toEqual([]);
    expect(cycleUp).toEqual([expect.stringContaining('src/events imports only the layers below its own')]);
    expect(down).toEqual([]);
    expect(test).toEqual([expect.stringContaining('src/placement imports only')]);
    expect(topTest).toEqual([]);
  }, 60_000);

  it('a low test helper may not import the folders that use it', async () => {
    const [helper] = await lint([at('test/factories.ts', "import type { Store } from '../src/store/store.js';\nexport type S = Store;\n")]);
    expect(helper).toEqual([expect.stringContaining('test/factories.ts imports only')]);
  }, 60_000);
});

describe('layers.js', () => {
  it('names every folder and top-level file of src/ once, so none escapes the rule', () => {
    const listed = layers.flat();
    expect(new Set(listed).size).toBe(listed.length);
    const src = fs
      .readdirSync(path.join(PACKAGE, 'src'), { withFileTypes: true })
      .filter((e) => e.isDirectory() || (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')))
      .map((e) => `src/${e.name}`);
    expect(src.filter((p) => !listed.includes(p))).toEqual([]);
    expect(listed.filter((p) => !fs.existsSync(path.join(PACKAGE, p)))).toEqual([]);
  });

  it('is what the server README draws: its src/ entries, row by row, top row first', () => {
    const readme = fs.readFileSync(path.join(PACKAGE, 'README.md'), 'utf8');
    const block = /The folders are layers[\s\S]*?```\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    const drawn = block
      .trimEnd()
      .split('\n')
      .map((line) =>
        line
          .trim()
          .split(/\s{2,}/)[0]!
          .split(' · '),
      );
    const rows = layers
      .map((row) => row.filter((p) => p.startsWith('src/')).map((p) => `${p.slice(4)}${p.endsWith('.ts') ? '' : '/'}`))
      .filter((row) => row.length)
      .reverse();
    expect(drawn).toEqual(rows);
  });
});
