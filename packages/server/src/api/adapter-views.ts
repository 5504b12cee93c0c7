import { failedChecksum } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';

/**
 * Why a LoRA adapter of `model` cannot be served now, one line per reason, for
 * `ctl explain ADAPTER` (issue 31); empty when it can. Its file failing its checksum is
 * found in the errors of the base's replicas (the agent fails the shard with the digest the
 * catalog expects, `checksumMismatchText`); the others from the base's routes.
 */
export function adapterProblems(ctl: Controller, model: string, name: string): string[] {
  const adapter = ctl.catalogView.adapter?.(name)?.adapter;
  const problems: string[] = [];
  const replicas = ctl.listReplicas().filter((r) => r.model === model);
  const sha = adapter?.sha256;
  if (sha) {
    for (const r of replicas) {
      // The shard's own error first: the replica's repeats it behind its shard and node.
      const error = [...r.shards.map((x) => x.error), r.error].find((e) => failedChecksum(e, sha));
      if (error) problems.push(`its file failed its checksum on replica ${r.id}: ${error.length > 500 ? `${error.slice(0, 499)}…` : error}`);
    }
  }
  const routes = ctl.routes(model);
  if (routes.length === 0) {
    const states = replicas.map((r) => `${r.id} ${r.state}`).join(', ');
    problems.push(`no replica of its base ${model} is ready${states ? ` (${states})` : ''}`);
  } else if (!routes.some((t) => t.adapters === undefined || t.adapters.includes(name))) {
    problems.push(`no ready replica of ${model} was started with it (a rollout adding it is not done)`);
  }
  return problems;
}
