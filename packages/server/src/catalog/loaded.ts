import type { Adapter, Model, Profile } from '@llmgw/shared';
import { editDistance } from './suggest.js';

/**
 * Longest model name or alias looked up: every surface (gateway, admin API, dashboard)
 * refuses longer ones before `resolve` or `suggest`, whose cost grows with the input.
 */
export const MAX_MODEL_NAME = 256;

/** A profile as the loader hands it out: the optional lists and counts filled in. */
export type CatalogProfile = Profile & {
  gpus: number;
  shards: number;
  args: string[];
  env: Record<string, string>;
  node_selector: Record<string, string>;
};

/** A model as the loader hands it out: still a `Model`, with its defaults made explicit. */
export type CatalogModel = Omit<Model, 'profiles'> & {
  aliases: string[];
  fallbacks: string[];
  scaling: { min: number; max: number };
  profiles: CatalogProfile[];
};

/**
 * A parsed, checked catalog. Build one with `parseCatalog` or `loadCatalog`; the
 * constructor trusts that its models have passed those checks.
 */
export class LoadedCatalog {
  /** Models in file order. */
  readonly models: CatalogModel[];
  readonly byName: Map<string, CatalogModel>;
  private readonly byAlias: Map<string, CatalogModel>;
  private readonly byAdapter: Map<string, { model: CatalogModel; adapter: Adapter }>;

  constructor(
    readonly file: string,
    models: CatalogModel[],
  ) {
    this.models = models;
    this.byName = new Map(models.map((m) => [m.name, m]));
    this.byAlias = new Map(models.flatMap((m) => m.aliases.map((a): [string, CatalogModel] => [a, m])));
    this.byAdapter = new Map(models.flatMap((m) => (m.adapters ?? []).map((adapter) => [adapter.name, { model: m, adapter }] as const)));
  }

  /** The LoRA adapter clients name as a model, with the base model that serves it. */
  adapter(name: string): { model: CatalogModel; adapter: Adapter } | undefined {
    return this.byAdapter.get(name);
  }

  /** The model with this name or alias. Names win, though the loader forbids overlaps. */
  resolve(nameOrAlias: string): CatalogModel | undefined {
    return this.byName.get(nameOrAlias) ?? this.byAlias.get(nameOrAlias);
  }

  /**
   * Up to three names or aliases close to `name`, closest first, at most one per model,
   * for "did you mean" messages. Case is ignored, and a name that contains what was
   * typed (`qwen` → `qwen-coder-14b`) counts as close even when the edit distance is large.
   */
  suggest(name: string): string[] {
    const query = name.toLowerCase();
    const limit = Math.max(2, Math.floor(query.length / 3));
    const best = new Map<CatalogModel, { text: string; distance: number }>();
    for (const model of this.models) {
      for (const text of [model.name, ...model.aliases]) {
        const candidate = text.toLowerCase();
        const contains = query.length >= 3 && (candidate.includes(query) || query.includes(candidate));
        // One inside the other: the distance is the length difference, exactly. Otherwise
        // the bounded distance, so a huge name is not compared character by character.
        const distance = contains ? Math.abs(query.length - candidate.length) : editDistance(query, candidate, limit);
        if (distance > limit && !contains) continue;
        const seen = best.get(model);
        if (!seen || distance < seen.distance) best.set(model, { text, distance });
      }
    }
    return [...best.values()]
      .sort((a, b) => a.distance - b.distance || a.text.localeCompare(b.text))
      .slice(0, 3)
      .map((s) => s.text);
  }
}
