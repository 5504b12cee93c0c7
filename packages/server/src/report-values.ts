import type { NodeReport } from '@llmgw/shared';

/**
 * What is kept of a node waiting for approval: its identity (who it says it is, for the
 * operator who approves it), none of its labels, GPUs, files or sources. Its next
 * heartbeat after the approval brings the rest.
 */
export function identityOf(r: NodeReport): NodeReport {
  return { node_id: r.node_id, hostname: r.hostname, mgmt_addr: r.mgmt_addr, agent_version: r.agent_version, labels: {}, gpus: [], fabrics: [] };
}

/**
 * Whether two JSON values say the same: as `JSON.stringify` would compare them (an
 * `undefined` member is no member), but without building the strings, and whatever the
 * order of the keys (a report read back from PostgreSQL's jsonb has its own).
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let members = 0;
  for (const k in x) {
    if (x[k] === undefined) continue;
    members++;
    if (!Object.hasOwn(y, k) || !sameJson(x[k], y[k])) return false;
  }
  for (const k in y) if (y[k] !== undefined) members--;
  return members === 0;
}
