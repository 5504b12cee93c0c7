import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { NodeView } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';
import { badRequest } from '../errors.js';
import { nodeViewer } from './views.js';

/** Most nodes one page of `GET /api/v1/nodes` (and of the fleet page) holds. */
export const NODE_PAGE_MAX = 500;
/** A page when the reader names no limit. */
export const NODE_PAGE_DEFAULT = 100;
/**
 * About how many bytes of JSON a page holds at most: a page ends after the node that
 * reaches this, so an answer is at most this plus one node (a node's view is bounded
 * by its report, REPORT_LIMITS.reportBytes). 140 nodes reporting at the cap fill many
 * small pages rather than one of 80 MB (issue 27).
 */
export const NODE_PAGE_BYTES = 2 * 1024 * 1024;
/** How long a page is built before the event loop gets a turn (health checks, heartbeats). */
const SLICE_MS = 5;

/** The header that carries the cursor of the next page (`?after=`); absent on the last page. */
export const NEXT_CURSOR_HEADER = 'X-Next-Cursor';

export interface NodePage {
  views: NodeView[];
  /** Each view as JSON, in order. */
  json: string[];
  /** The cursor of the page after this one (the last id here); absent on the last page. */
  next?: string;
}

/**
 * One page of the fleet in `Inventory.list()`'s order (by id): the nodes after `after`
 * (the last id of the page before; none: from the first), at most `limit` and about
 * `maxBytes` of JSON. Built in slices of a few ms with the event loop served in between,
 * so listing a large fleet never stalls the listeners.
 */
export async function nodePage(
  ctl: Controller,
  after: string | undefined,
  limit: number = NODE_PAGE_DEFAULT,
  maxBytes: number = NODE_PAGE_BYTES,
): Promise<NodePage> {
  const all = ctl.inventory.list();
  let i = after === undefined ? 0 : firstAfter(all, after);
  const view = nodeViewer(ctl);
  const page: NodePage = { views: [], json: [] };
  let bytes = 0;
  let slice = Date.now();
  while (i < all.length && page.views.length < limit && bytes < maxBytes) {
    const v = view(all[i++]!);
    const json = JSON.stringify(v);
    page.views.push(v);
    page.json.push(json);
    bytes += json.length;
    if (Date.now() - slice >= SLICE_MS) {
      await yieldToLoop();
      slice = Date.now();
    }
  }
  if (i < all.length && page.views.length) page.next = page.views.at(-1)!.id;
  return page;
}

/** The index of the first node whose id sorts after `after` (the list is sorted: a binary search). */
function firstAfter(all: readonly { id: string }[], after: string): number {
  let lo = 0;
  let hi = all.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (all[mid]!.id.localeCompare(after) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** `?after=CURSOR&limit=N` of a node list, checked: a 400 names the parameter at fault. */
export function pageQuery(query: Record<string, unknown>): { after?: string; limit: number } {
  const { after, limit } = query;
  if (after !== undefined && (typeof after !== 'string' || after.length === 0 || after.length > 253)) {
    throw badRequest('after must be one cursor (the X-Next-Cursor of the page before)', 'after');
  }
  let n = NODE_PAGE_DEFAULT;
  if (limit !== undefined) {
    n = typeof limit === 'string' && /^\d+$/.test(limit) ? Number(limit) : NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > NODE_PAGE_MAX) throw badRequest(`limit must be a whole number from 1 to ${NODE_PAGE_MAX}`, 'limit');
  }
  return { ...(after !== undefined ? { after } : {}), limit: n };
}
