import { engineEnvRefusal } from '@llmgw/shared';
import { q } from './errors.js';
import { LoadedCatalog, type CatalogModel } from './loaded.js';
import { checkSources, type CatalogRules } from './sources.js';

export type { CatalogRules };

/**
 * The rules the schema cannot express because they relate fields or models to each
 * other. Reports every problem through `fail` and goes on; a name that is a problem
 * (a duplicate, a clashing alias) is left out of the later checks, so one mistake is
 * reported once.
 */
export function crossCheck(
  models: CatalogModel[],
  fail: (field: string, problem: string) => void,
  lineOf: (field: string) => number,
  rules: CatalogRules = {},
): void {
  const firstByName = new Map<string, number>();
  models.forEach((m, i) => {
    const earlier = firstByName.get(m.name);
    if (earlier !== undefined) {
      const line = lineOf(`models[${earlier}]`);
      fail(`models[${i}].name`, `${q(m.name)} is already used by models[${earlier}] (line ${line})`);
      return;
    }
    firstByName.set(m.name, i);
  });

  const aliasOwner = new Map<string, { model: number; alias: number; name: string }>();
  models.forEach((m, i) => {
    const at = `models[${i}]`;
    checkSources(m, at, fail, rules);
    if (m.scaling.min > m.scaling.max) {
      fail(`${at}.scaling.min`, `(${m.scaling.min}) is greater than scaling.max (${m.scaling.max})`);
    }
    // With neither a surge nor an unavailable replica allowed, a rollout could never move.
    if (m.rollout?.max_surge === 0 && m.rollout.max_unavailable === undefined) {
      fail(`${at}.rollout.max_surge`, 'is 0 and max_unavailable defaults to 0: a rollout could never replace a replica; allow max_unavailable >= 1');
    } else if (m.rollout?.max_surge === 0 && m.rollout.max_unavailable === 0) {
      fail(`${at}.rollout.max_surge`, 'and max_unavailable are both 0: a rollout could never replace a replica; allow one of them >= 1');
    }

    const profileNames = new Map<string, number>();
    m.profiles.forEach((p, j) => {
      const pat = `${at}.profiles[${j}]`;
      const earlier = profileNames.get(p.name);
      if (earlier !== undefined) {
        const line = lineOf(`${at}.profiles[${earlier}]`);
        fail(`${pat}.name`, `${q(p.name)} is already used by profiles[${earlier}] (line ${line})`);
      } else {
        profileNames.set(p.name, j);
      }
      if (p.engine === 'command' && !p.command) fail(`${pat}.command`, 'is required with engine command');
      for (const name of Object.keys(p.env ?? {})) {
        const refused = engineEnvRefusal(p.engine, name);
        if (refused) fail(`${pat}.env.${name}`, refused);
      }
      if (p.engine !== 'command' && p.command) {
        fail(`${pat}.command`, `is only used with engine command, not ${p.engine}`);
      }
      // Placement puts every shard of a replica on nodes of one interconnect, the profile's fabric.
      if (p.shards > 1 && !p.fabric) fail(`${pat}.fabric`, `is required when shards > 1 (shards: ${p.shards})`);
      // Without gpus the profile is placed on CPU and these would be silently ignored.
      if (p.gpus === 0 && p.gpu_class) fail(`${pat}.gpu_class`, 'needs gpus > 0 (with gpus 0 the profile runs on CPU)');
      if (p.gpus === 0 && p.min_gpu_memory_gb !== undefined) {
        fail(`${pat}.min_gpu_memory_gb`, 'needs gpus > 0 (with gpus 0 the profile runs on CPU)');
      }
    });

    m.aliases.forEach((a, j) => {
      const field = `${at}.aliases[${j}]`;
      const named = firstByName.get(a);
      if (named === i) return fail(field, `${q(a)} is the model's own name`);
      if (named !== undefined) {
        return fail(field, `${q(a)} is already the name of models[${named}] (line ${lineOf(`models[${named}]`)})`);
      }
      const other = aliasOwner.get(a);
      if (other?.model === i) return fail(field, `${q(a)} is listed twice`);
      if (other) {
        const line = lineOf(`models[${other.model}].aliases[${other.alias}]`);
        return fail(field, `${q(a)} is already an alias of model ${q(other.name)} (line ${line})`);
      }
      aliasOwner.set(a, { model: i, alias: j, name: m.name });
    });
  });

  checkAdapters(models, fail, lineOf, firstByName, aliasOwner);

  models.forEach((m, i) => {
    const seen = new Set<string>();
    m.fallbacks.forEach((f, j) => {
      const field = `models[${i}].fallbacks[${j}]`;
      if (f === m.name) return fail(field, `${q(f)} is the model itself`);
      if (seen.has(f)) return fail(field, `${q(f)} is listed twice`);
      seen.add(f);
      if (firstByName.has(f)) return;
      const owner = aliasOwner.get(f);
      if (owner) return fail(field, `${q(f)} is an alias; name the model ${q(owner.name)}`);
      // Suggest model names only: an alias would be rejected here too.
      const known = new LoadedCatalog('', models);
      // A name given twice (reported above) would be suggested twice.
      const close = [...new Set(known.suggest(f).map((s) => known.resolve(s)?.name ?? s))];
      const hint = close.length ? ` (did you mean ${close.map(q).join(', ')}?)` : '';
      fail(field, `${q(f)} is not a model in this catalog${hint}`);
    });
  });

  // A cycle has at least two models: one falling back to itself was rejected above.
  const [start, next, ...rest] = findFallbackCycle(models) ?? [];
  if (start && next) {
    const target = next.model.name;
    const path = [start, next, ...rest, start].map((r) => r.model.name).join(' → ');
    const entry = start.model.fallbacks.indexOf(target);
    fail(`models[${start.at}].fallbacks[${entry}]`, `${q(target)} makes a cycle: ${path}`);
  }
}

/** A model and its position in the file. */
interface ModelAt {
  at: number;
  model: CatalogModel;
}

/**
 * The first fallback cycle, rotated to start at the model that comes first in the file,
 * so the same catalog always reports the same cycle the same way. Names are unique by
 * now (duplicates were rejected first).
 */
function findFallbackCycle(models: CatalogModel[]): ModelAt[] | undefined {
  const all = models.map((model, at): ModelAt => ({ at, model }));
  const byName = new Map<string, ModelAt>();
  for (const m of all) if (!byName.has(m.model.name)) byName.set(m.model.name, m);
  const state = new Map<ModelAt, 'open' | 'done'>();
  const stack: ModelAt[] = [];
  const visit = (m: ModelAt): ModelAt[] | undefined => {
    state.set(m, 'open');
    stack.push(m);
    for (const f of m.model.fallbacks) {
      const next = byName.get(f);
      if (next === undefined) continue;
      if (state.get(next) === 'open') return stack.slice(stack.indexOf(next));
      if (!state.has(next)) {
        const found = visit(next);
        if (found) return found;
      }
    }
    stack.pop();
    state.set(m, 'done');
    return undefined;
  };
  for (const m of all) {
    if (state.has(m)) continue;
    const cycle = visit(m);
    if (cycle) {
      const lowest = Math.min(...cycle.map((c) => c.at));
      const first = cycle.findIndex((c) => c.at === lowest);
      return [...cycle.slice(first), ...cycle.slice(0, first)];
    }
  }
  return undefined;
}

/**
 * Adapter names are model names for clients, so each is unique among every model's name,
 * alias and adapter (every engine llmgw runs serves adapters, so no engine is refused).
 */
function checkAdapters(
  models: CatalogModel[],
  fail: (field: string, problem: string) => void,
  lineOf: (field: string) => number,
  firstByName: Map<string, number>,
  aliasOwner: Map<string, { model: number; alias: number; name: string }>,
): void {
  const adapterOwner = new Map<string, { model: number; adapter: number }>();
  models.forEach((m, i) => {
    (m.adapters ?? []).forEach((a, j) => {
      const field = `models[${i}].adapters[${j}].name`;
      const named = firstByName.get(a.name);
      if (named === i) return fail(field, `${q(a.name)} is the model's own name: name the adapter apart from its base`);
      if (named !== undefined) return fail(field, `${q(a.name)} is already the name of models[${named}] (line ${lineOf(`models[${named}]`)})`);
      const alias = aliasOwner.get(a.name);
      if (alias) return fail(field, `${q(a.name)} is already an alias of model ${q(alias.name)}`);
      const other = adapterOwner.get(a.name);
      if (other) {
        const where = `models[${other.model}].adapters[${other.adapter}]`;
        return fail(
          field,
          other.model === i ? `${q(a.name)} is listed twice` : `${q(a.name)} is already an adapter of models[${other.model}] (line ${lineOf(where)})`,
        );
      }
      adapterOwner.set(a.name, { model: i, adapter: j });
    });
    if (!m.adapters?.length) {
      if (m.adapter_routing !== undefined) fail(`models[${i}].adapter_routing`, 'is only used when the model lists adapters');
      m.profiles.forEach((p, j) => {
        if (p.max_loaded_adapters !== undefined) fail(`models[${i}].profiles[${j}].max_loaded_adapters`, 'is only used when the model lists adapters');
      });
    }
  });
}
