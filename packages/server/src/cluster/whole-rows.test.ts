import { describe, expect, it } from '@jest/globals';
import type { InventoryNode } from '../inventory.js';
import type { StoredNode } from '../store/store.js';
import { wantsWholeRow } from './whole-rows.js';

const held = (o: Partial<InventoryNode> = {}): InventoryNode => ({ id: 'n1', admin: { state: 'ready' }, lastSeenMs: 1000, reported: true, ...o });
const head = (o: Partial<StoredNode> = {}): StoredNode => ({ id: 'n1', admin: { state: 'ready' }, lastSeenMs: 1100, ...o });

describe('the full reload reads a whole node row', () => {
  it.each<[string, InventoryNode | undefined, StoredNode, number | undefined, boolean]>([
    ['for a node this instance does not hold', undefined, head(), 1100, true],
    ['for a later seq', held({ seq: 4 }), head({ seq: 5 }), 1100, true],
    ['for a seq where this instance holds none', held(), head({ seq: 5 }), 1100, true],
    ['not for the seq it holds (its own write coming back)', held({ seq: 5 }), head({ seq: 5 }), 1100, false],
    ['not for an earlier seq', held({ seq: 6 }), head({ seq: 5 }), 1100, false],
    ['without seq, for a heartbeat the database saw after the last heard here', held({ writtenDbMs: 900 }), head(), 1100, true],
    ['without seq, not for its own last write', held({ writtenDbMs: 1100 }), head(), 1100, false],
    ['without seq, not for a heartbeat older than the last heard here', held(), head(), 900, false],
    ['not for a row no heartbeat wrote (an admin state only)', held(), head({ lastSeenMs: undefined }), undefined, false],
  ])('%s', (_name, node, row, seenAtMs, wanted) => {
    expect(wantsWholeRow(node, row, seenAtMs)).toBe(wanted);
  });
});
