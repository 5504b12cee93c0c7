import type { Replica } from '../domain.js';
import type { Store, StoredKey, StoredToken, UsageDelta } from './store.js';

/**
 * A store in memory: keys kept, usage recorded in `usage`, replicas loaded from the list
 * given; every other write is dropped. Override a method to make it fail.
 */
export function memoryStore(o: { replicas?: Replica[] } & Partial<Store> = {}): Store & { usage: UsageDelta[] } {
  const { replicas = [], ...overrides } = o;
  const keys = new Map<string, StoredKey>();
  const tokens = new Map<string, StoredToken>();
  const usage: UsageDelta[] = [];
  return {
    kind: 'sqlite',
    usage,
    loadNodes: async () => [],
    saveNodeAdmin: async () => {},
    saveNodeReports: async () => {},
    deleteNode: async () => {},
    loadCredentials: async () => [],
    addCredential: async () => true,
    loadReplicas: async () => replicas,
    loadRollouts: async () => [],
    saveRolloutHistory: async () => {},
    saveRolloutControl: async () => {},
    writeReplicas: async () => {},
    loadKeys: async () => [...keys.values()],
    saveKey: async (k) => void keys.set(k.id, k),
    addUsage: async (ds) => {
      usage.push(...ds.map((d) => ({ ...d })));
      return [];
    },
    loadUsage: async () => [],
    addEvents: async (es) => [...es],
    loadEvents: async () => [],
    loadTokens: async () => [...tokens.values()],
    saveToken: async (t) => void tokens.set(t.id, t),
    probe: async () => {},
    close: async () => {},
    ...overrides,
  };
}

/**
 * `usage` summed per key and model, the minute dropped: requests of one test that
 * straddle a minute boundary are written as two rows (one per minute), and a test of
 * what was counted should not fail on the clock.
 */
export function usageTotals(usage: readonly UsageDelta[]): Omit<UsageDelta, 'minuteMs'>[] {
  const by = new Map<string, Omit<UsageDelta, 'minuteMs'>>();
  for (const { minuteMs: _, ...u } of usage) {
    const id = `${u.keyId}\u0000${u.model}`;
    const t = by.get(id);
    if (!t) by.set(id, { ...u });
    else for (const k of ['requests', 'errors', 'cancelled', 'promptTokens', 'completionTokens'] as const) t[k] += u[k];
  }
  return [...by.values()];
}
