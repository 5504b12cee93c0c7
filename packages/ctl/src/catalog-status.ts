import { Chalk, type ChalkInstance } from 'chalk';
import type { CatalogStatusView, ModelView } from '@llmgw/shared';

/**
 * The line `ctl models` prints above its table while the catalog's latest reload failed:
 * when, and the first problem; the models below are still the previous catalog's. Empty
 * when the last reload was good.
 */
export function catalogNotice(status: CatalogStatusView, c: ChalkInstance): string {
  const e = status.reload_error;
  if (!e) return '';
  const others = e.problems.length - 1 + e.more;
  const first = e.problems[0]?.message ?? `catalog ${status.file ?? ''}: reload failed`;
  const rest = others > 0 ? ` (+${others} more: the dashboard's Models page lists all)` : '';
  return c.red(`catalog reload failed ${ago(e.age_s)} ago (${e.at.slice(11, 19)} UTC), still running the previous catalog: ${first}${rest}`);
}

/** No colours: the notice as text for `-o json`. */
const PLAIN = new Chalk({ level: 0 });

/**
 * `ctl models -o json`: the models, each with `catalog_reload_error` (the line the table
 * form prints above the table) while the catalog's latest reload failed, since every model
 * listed is then the previous catalog's. Still the list scripts read; nothing added after
 * a good reload.
 */
export function modelsJson(models: ModelView[], status: CatalogStatusView): Array<ModelView & { catalog_reload_error?: string }> {
  const notice = catalogNotice(status, PLAIN);
  return notice ? models.map((m) => ({ ...m, catalog_reload_error: notice })) : models;
}

function ago(s: number): string {
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}
