import type { ChalkInstance } from 'chalk';
import type { CatalogStatusView } from '@llmgw/shared';

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

function ago(s: number): string {
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}
