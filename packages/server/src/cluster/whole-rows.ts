import type { InventoryNode } from '../inventory.js';
import type { StoredNode } from '../store/store.js';

/**
 * Whether the periodic full reload must read a node's whole row, given its head (the row
 * without report and shards) and `seenAtMs`, when the database saw its heartbeat, on this
 * instance's clock. Only where `Inventory.applyRemote` could take the report or the
 * liveness of it: a node this instance does not hold, a heartbeat with a later `seq`, or,
 * without `seq` (older agents), one the database saw after the last heard here that is
 * not this instance's own write coming back. The reload otherwise takes the admin state
 * from the head, and liveness heard elsewhere comes with the pulls every half second;
 * the full reload is their safety net and catches deletions and admin states.
 */
export function wantsWholeRow(held: InventoryNode | undefined, head: StoredNode, seenAtMs: number | undefined): boolean {
  if (held === undefined) return true;
  if (head.seq !== undefined) return held.seq === undefined || head.seq > held.seq;
  if (head.lastSeenMs === undefined || seenAtMs === undefined) return false;
  if (held.writtenDbMs !== undefined && head.lastSeenMs <= held.writtenDbMs) return false;
  return seenAtMs > held.lastSeenMs;
}
