import type { Plan } from './plan.js';

/**
 * Step 3: replicas with a shard on a lost (or forgotten) node are removed, so scaling
 * places them elsewhere — unless so much of the fleet went silent at once that this
 * server's own network is the likelier culprit: then nothing is replaced, and the plan
 * says why (`paused`). A draining replica is left to its drain.
 */
export function lostNodes(plan: Plan): void {
  const { nodes, policy } = plan.input;
  const lost = nodes.filter((n) => n.liveness === 'lost');
  if (lost.length > 0 && nodes.length >= 2 && lost.length / nodes.length > policy.maxLostFraction) {
    plan.paused =
      `${lost.length} of ${nodes.length} nodes went silent (${lost.map((n) => n.id).join(', ')}); ` +
      `not replacing their replicas: that many at once is more likely this server's own network`;
    return;
  }
  for (const r of plan.live()) {
    if (r.state === 'draining') continue;
    const shard = r.shards.find((s) => {
      const n = plan.nodes.get(s.nodeId);
      return !n || n.liveness === 'lost';
    });
    if (!shard) continue;
    const node = plan.nodes.get(shard.nodeId);
    if (node) plan.remove(r, 'node-lost', `node ${node.id} is lost (silent ${node.lastSeenAgoS}s); replacing elsewhere`);
    else plan.remove(r, 'node-unknown', `node ${shard.nodeId} is no longer known`);
  }
}
