import { describe, expect, it } from '@jest/globals';
import type { NodeReport } from '@llmgw/shared';
import { Inventory } from './inventory.js';
import type { Store } from './store.js';

function failingAdminStore(): Store {
  return {
    loadNodes: () => [],
    saveNodeAdmin: () => {
      throw new Error('disk full');
    },
    saveNodeReport: () => {},
    loadReplicas: () => [],
    saveReplica: () => {},
    deleteReplica: () => {},
    loadKeys: () => [],
    saveKey: () => {},
    addUsage: () => {},
    loadUsage: () => [],
    close: () => {},
  };
}

const report: NodeReport = { node_id: 'n1', hostname: 'n1', mgmt_addr: '10.0.0.1', agent_version: 't', labels: {}, gpus: [], fabrics: [] };

describe('Inventory.setAdmin', () => {
  it('leaves the node as it was when its new admin state cannot be saved', () => {
    const inv = new Inventory(failingAdminStore(), { notReadyAfterS: 15, lostAfterS: 60 });
    inv.report(report, 1000);
    expect(() => inv.setAdmin('n1', 'draining', 'PSU swap', new Date(2000))).toThrow('disk full');
    // The operator got an error, so the reconciler must not start draining the node either.
    expect(inv.get('n1')!.admin.state).toBe('ready');
    expect(inv.snapshot(2000)[0]!.admin).toBe('ready');
  });
});
