import { describe, expect, it } from '@jest/globals';
import type { CatalogStatusView } from '@llmgw/shared';
import { Chalk } from 'chalk';
import { catalogNotice, modelsJson } from './catalog-status.js';

const plain = new Chalk({ level: 0 });
const problem = (line: number, what: string) => ({
  message: `catalog c.yaml: model "m" (line ${line}): ${what}`,
  file: 'c.yaml',
  model: 'm',
  line,
  problem: what,
});
const status = (o: Partial<CatalogStatusView> = {}): CatalogStatusView => ({ file: 'c.yaml', models: 2, loaded_at: '2026-01-01T10:00:00.000Z', ...o });
const failed = (problems: ReturnType<typeof problem>[], more = 0, age_s = 12) =>
  status({ reload_error: { at: '2026-01-01T10:05:03.000Z', age_s, problems, more } });

describe('catalogNotice', () => {
  it('says nothing after a good reload', () => {
    expect(catalogNotice(status(), plain)).toBe('');
  });

  it('says when, and the first problem', () => {
    expect(catalogNotice(failed([problem(6, 'engine must be one of vllm')]), plain)).toBe(
      'catalog reload failed 12s ago (10:05:03 UTC), still running the previous catalog: catalog c.yaml: model "m" (line 6): engine must be one of vllm',
    );
  });

  it('counts the other problems, listed or not, and where to see them', () => {
    const out = catalogNotice(failed([problem(6, 'a'), problem(9, 'b')], 3, 125), plain);
    expect(out).toMatch(/^catalog reload failed 2m ago .*\(line 6\): a \(\+4 more: the dashboard's Models page lists all\)$/);
  });
});

describe('modelsJson (ctl models -o json)', () => {
  const model = {
    name: 'm',
    aliases: [],
    source: 'test',
    min_replicas: 1,
    max_replicas: 1,
    ready_replicas: 1,
    total_replicas: 1,
    fallbacks: [],
    profiles: ['cpu'],
    routing: 'cache-aware',
  };

  it("carries the catalog's reload error on every model, as the table form prints it (issue 30)", () => {
    const out = modelsJson([model, { ...model, name: 'n' }], failed([problem(6, 'engine must be one of vllm')]));
    expect(out.map((m) => m.catalog_reload_error)).toEqual([
      'catalog reload failed 12s ago (10:05:03 UTC), still running the previous catalog: catalog c.yaml: model "m" (line 6): engine must be one of vllm',
      'catalog reload failed 12s ago (10:05:03 UTC), still running the previous catalog: catalog c.yaml: model "m" (line 6): engine must be one of vllm',
    ]);
  });

  it('adds nothing after a good reload', () => {
    expect(modelsJson([model], status())).toEqual([model]);
  });
});
