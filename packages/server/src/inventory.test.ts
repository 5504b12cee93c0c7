import { describe, expect, it } from '@jest/globals';
import { Inventory } from './inventory.js';
import { makeReport, memoryStore } from '../test/factories.js';

const report = makeReport({ node_id: 'n1' });

describe('Inventory.snapshot', () => {
  it('passes the CPU cores an agent reports, and leaves them out when it does not', () => {
    const inv = new Inventory(memoryStore(), { notReadyAfterS: 15, lostAfterS: 60 });
    inv.report(makeReport({ node_id: 'n1', cpu_cores: 32 }), 1000);
    inv.report(makeReport({ node_id: 'n2' }), 1000);
    expect(inv.snapshot(1000).map((n) => n.cpuCores)).toEqual([32, undefined]);
  });
});

describe('Inventory.setAdmin', () => {
  it('leaves the node as it was when its new admin state cannot be saved', () => {
    const inv = new Inventory(
      memoryStore({
        saveNodeAdmin: () => {
          throw new Error('disk full');
        },
      }), { notReadyAfterS: 15, lostAfterS: 60 });
    inv.report(report, 1000);
    expect(() => inv.setAdmin('n1', 'draining', 'PSU swap', new Date(2000))).toThrow('disk full');
    // The operator got an error, so the reconciler must not start draining the node either.
    expect(inv.get('n1')!.admin.state).toBe('ready');
    expect(inv.snapshot(2000).at(0)?.admin).toBe('ready');
  });
});
