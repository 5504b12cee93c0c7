import type { LoadedCatalog } from './loaded.js';

/** What a reload changed, by model name. */
export interface CatalogDiff {
  added: string[];
  removed: string[];
  /** Models in both whose settings differ (new replicas get the new settings). */
  changed: string[];
}

/** The models added, removed and changed from `previous` to `next`, in file order. */
export function diffCatalogs(previous: LoadedCatalog, next: LoadedCatalog): CatalogDiff {
  const changed = next.models.filter((m) => {
    const before = previous.byName.get(m.name);
    return before !== undefined && JSON.stringify(before) !== JSON.stringify(m);
  });
  return {
    added: next.models.filter((m) => !previous.byName.has(m.name)).map((m) => m.name),
    removed: previous.models.filter((m) => !next.byName.has(m.name)).map((m) => m.name),
    changed: changed.map((m) => m.name),
  };
}

/** `+1 model, -2 models, 1 changed`, or `no model changed`, for the reload's log line. */
export function describeDiff(d: CatalogDiff): string {
  const models = (n: number) => `${n} ${n === 1 ? 'model' : 'models'}`;
  const parts = [
    ...(d.added.length ? [`+${models(d.added.length)}`] : []),
    ...(d.removed.length ? [`-${models(d.removed.length)}`] : []),
    ...(d.changed.length ? [`${d.changed.length} changed`] : []),
  ];
  // A reload whose only change is the order of the models.
  return parts.length ? parts.join(', ') : 'no model changed';
}
