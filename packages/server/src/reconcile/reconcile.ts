import type { Model } from '@llmgw/shared';
import { gbToMb } from '@llmgw/shared';
import { ACTIVE_REPLICA_STATES, HOLDS_RESOURCES, type Replica } from '../domain.js';
import { placeOnFleet, prepareFleet, reservationsFor, reserve } from '../placement/index.js';
import type { NodeSnapshot, PlacementOutcome, Reservation } from '../snapshot.js';

export interface ReconcilePolicy {
  /** How long a failed replica keeps its slot before it is replaced. */
  failedBackoffMs: (replica: Replica) => number;
  /** Replacements for a draining node that may be in progress at once, per model. */
  drainParallel: number;
  /** A replacement must be ready this long before the replica it replaces stops taking traffic. */
  minHealthyMs: number;
  /** Longest a replica that takes no new traffic waits for its in-flight requests. */
  drainTimeoutMs: number;
  /** Above this share of nodes lost at once, lost nodes' replicas are not replaced. */
  maxLostFraction: number;
}

/** What the gateway knows about a model's traffic. */
export interface ModelLoad {
  inFlight: number;
  lastRequestMs?: number;
  /** Requests waiting for a model with no ready replica (scale from zero). */
  waiting: number;
}

export interface ReconcileInput {
  models: Model[];
  nodes: NodeSnapshot[];
  replicas: Replica[];
  nowMs: number;
  /** Injected so the function stays pure: ids and keys come from the caller. */
  newReplica: (model: string) => { id: string; apiKey: string; masterPort: number };
  policy: ReconcilePolicy;
  inFlight: (replicaId: string) => number;
  load: (model: string) => ModelLoad;
  /** Since when each model has wanted fewer replicas than it has (the scale-down window). */
  lowSince: ReadonlyMap<string, number>;
  /** Models not to place this pass (their memory estimate is on its way). */
  defer?: ReadonlySet<string>;
}

export interface ReconcileResult {
  create: Replica[];
  /** Replicas to stop and forget, with why. */
  remove: { id: string; reason: string }[];
  /** Replicas whose state or drain notes changed (copies; the input is not mutated). */
  update: Replica[];
  /** The last placement attempt per model, for `explain`. */
  attempts: Map<string, PlacementOutcome>;
  /** Replicas each model should have, after autoscaling. */
  desired: Map<string, number>;
  lowSince: Map<string, number>;
  /** Set when lost nodes' replicas are not being replaced, and why. */
  paused?: string;
}

const DEFAULT_TARGET_IN_FLIGHT = 4;
const DEFAULT_SCALE_DOWN_DELAY_S = 300;
const DEFAULT_IDLE_TIMEOUT_S = 600;

/** Resources held by replicas that are placed and not yet stopped. */
export function reservationsOf(replicas: Iterable<Replica>): Reservation[] {
  const out: Reservation[] = [];
  for (const r of replicas) {
    if (!HOLDS_RESOURCES.has(r.state)) continue;
    for (const s of r.shards) {
      out.push({ replicaId: r.id, model: r.model, nodeId: s.nodeId, memoryMb: r.memoryMb, gpuUuids: s.gpuUuids });
    }
  }
  return out;
}

/**
 * Level-triggered reconciliation: compares the catalog's wishes and the fleet with the
 * replicas that exist and says what to create, change and remove. Pure: the caller
 * applies and persists the result, so the same input always gives the same answer and
 * tests need no server.
 *
 * Order matters: removals first (gone models, expired failures, lost nodes, finished
 * drains), then drains (replace before stopping), then scaling to the wanted count.
 */
export function reconcile(input: ReconcileInput): ReconcileResult {
  const { nowMs, policy } = input;
  const result: ReconcileResult = {
    create: [],
    remove: [],
    update: [],
    attempts: new Map(),
    desired: new Map(),
    lowSince: new Map(input.lowSince),
  };
  const byName = new Map(input.models.map((m) => [m.name, m]));
  const nodes = new Map(input.nodes.map((n) => [n.id, n]));
  const lost = input.nodes.filter((n) => n.liveness === 'lost');
  if (lost.length > 0 && input.nodes.length >= 2 && lost.length / input.nodes.length > policy.maxLostFraction) {
    result.paused =
      `${lost.length} of ${input.nodes.length} nodes went silent (${lost.map((n) => n.id).join(', ')}); ` +
      `not replacing their replicas: that many at once is more likely this server's own network`;
  }

  const updated = new Map<string, Replica>();
  const touch = (r: Replica): Replica => {
    let u = updated.get(r.id);
    if (!u) {
      u = { ...r, shards: r.shards.map((s) => ({ ...s })) };
      updated.set(r.id, u);
    }
    return u;
  };
  const removed = new Set<string>();
  /** Nodes where a replica of each model failed and is removed in this pass: not straight back there. */
  const failedOn = new Map<string, string[]>();
  const drop = (r: Replica, reason: string) => {
    if (removed.has(r.id)) return;
    removed.add(r.id);
    result.remove.push({ id: r.id, reason });
  };

  // 1. Removals.
  for (const r of input.replicas) {
    const model = byName.get(r.model);
    if (!model) drop(r, `model ${r.model} is no longer in the catalog`);
    else if (!model.profiles.some((p) => p.name === r.profile)) drop(r, `profile ${r.profile} is no longer in model ${r.model}`);
    else if (r.state === 'stopped') drop(r, 'stopped');
    else if (r.state === 'failed' && nowMs - r.createdAtMs >= policy.failedBackoffMs(r)) {
      drop(r, `replaced after failing: ${r.error ?? 'unknown error'}`);
      failedOn.set(r.model, [...(failedOn.get(r.model) ?? []), ...r.shards.map((s) => s.nodeId)]);
    } else if (r.state === 'draining') {
      const waited = nowMs - (r.drainStartedMs ?? nowMs);
      if (input.inFlight(r.id) === 0 || waited >= policy.drainTimeoutMs) drop(r, r.drainReason ?? 'drained');
    } else if (!result.paused) {
      const gone = r.shards.map((s) => nodes.get(s.nodeId)).find((n) => !n || n.liveness === 'lost');
      const shard = r.shards.find((s) => !nodes.get(s.nodeId) || nodes.get(s.nodeId)!.liveness === 'lost');
      if (shard) {
        drop(r, gone ? `node ${gone.id} is lost (silent ${gone.lastSeenAgoS}s); replacing elsewhere` : `node ${shard.nodeId} is no longer known`);
      }
    }
  }
  const live = (): Replica[] => input.replicas.filter((r) => !removed.has(r.id)).map((r) => updated.get(r.id) ?? r);
  // One prepared fleet per pass: the checks that do not depend on reservations are
  // worked out once, and each placement only updates what it reserves.
  const fleet = prepareFleet(input.nodes, reservationsOf(live()));
  const placeFor = (model: Model, avoid: string[]): PlacementOutcome => {
    const existingOnNode: Record<string, number> = {};
    for (const r of live()) if (r.model === model.name) for (const s of r.shards) existingOnNode[s.nodeId] = (existingOnNode[s.nodeId] ?? 0) + 1;
    for (const r of result.create) if (r.model === model.name) for (const s of r.shards) existingOnNode[s.nodeId] = (existingOnNode[s.nodeId] ?? 0) + 1;
    const outcome = placeOnFleet(fleet, model, { existingOnNode, avoidNodes: avoid });
    result.attempts.set(model.name, outcome);
    return outcome;
  };
  const create = (model: Model, outcome: PlacementOutcome, extra: Partial<Replica> = {}): Replica => {
    const p = outcome.placement!;
    const ids = input.newReplica(model.name);
    const memoryMb = gbToMb(p.profile.min_memory_gb ?? 0);
    const replica: Replica = {
      id: ids.id,
      model: model.name,
      profile: p.profile.name,
      state: 'pending',
      ...(p.pool ? { pool: p.pool } : {}),
      ...(p.fabric ? { fabric: p.fabric } : {}),
      createdAtMs: nowMs,
      memoryMb,
      apiKey: ids.apiKey,
      ...(p.shards.length > 1 ? { masterPort: ids.masterPort } : {}),
      ...extra,
      shards: p.shards.map((s) => ({
        id: `${ids.id}-${s.rank}`,
        nodeId: s.nodeId,
        rank: s.rank,
        gpuUuids: s.gpuUuids,
        gpuIndices: s.gpuIndices,
        state: 'pending',
      })),
    };
    result.create.push(replica);
    reserve(fleet, reservationsFor(p, replica.id, model.name));
    return replica;
  };
  const stopTakingTraffic = (r: Replica, reason: string) => {
    const u = touch(r);
    u.state = 'draining';
    u.drainStartedMs = nowMs;
    u.drainReason = reason;
    delete u.drainBlocked;
  };

  // 2. Drains: start the replacement, wait for it to be ready and healthy a while, then
  // stop sending the old one traffic; it is removed once its requests finish (step 1).
  for (const r of live()) {
    if (!ACTIVE_REPLICA_STATES.has(r.state)) continue;
    const draining = r.shards.map((s) => nodes.get(s.nodeId)).find((n) => n?.admin === 'draining');
    if (!draining) continue;
    if (draining.drainForce) {
      drop(r, `node ${draining.id} drained with --force`);
      continue;
    }
    if (draining.drainDeadlineMs !== undefined && nowMs >= draining.drainDeadlineMs) {
      drop(r, `node ${draining.id}: drain deadline passed`);
      continue;
    }
    if (r.state !== 'ready') {
      drop(r, `node ${draining.id} is draining and the replica was not serving yet`);
      continue;
    }
    const model = byName.get(r.model)!;
    const replacement = [...live(), ...result.create].find((x) => x.replaces === r.id && ACTIVE_REPLICA_STATES.has(x.state));
    if (replacement) {
      const healthy = replacement.state === 'ready' && nowMs - (replacement.readySinceMs ?? nowMs) >= policy.minHealthyMs;
      if (healthy) stopTakingTraffic(r, `node ${draining.id} drained; traffic moved to ${replacement.id}`);
      else if (r.drainBlocked) delete touch(r).drainBlocked;
      continue;
    }
    const inProgress = [...live(), ...result.create].filter(
      (x) => x.model === r.model && x.replaces && x.state !== 'ready' && ACTIVE_REPLICA_STATES.has(x.state),
    ).length;
    if (inProgress >= policy.drainParallel) continue;
    const outcome = placeFor(model, [draining.id]);
    if (outcome.placement) {
      create(model, outcome, { replaces: r.id });
      if (r.drainBlocked) delete touch(r).drainBlocked;
    } else if (r.drainBlocked !== outcome.summary) {
      touch(r).drainBlocked = outcome.summary;
    }
  }

  // 3. Scaling: each model between min and max, following its in-flight load.
  for (const model of input.models) {
    const scaling = model.scaling ?? { min: 1, max: 1 };
    const min = scaling.min;
    const max = Math.max(scaling.max, min);
    const mine = live().filter((r) => r.model === model.name);
    const all = [...mine, ...result.create.filter((r) => r.model === model.name)];
    // A replacement does not add capacity until the replica it replaces steps down, and a
    // failed replica keeps its slot during its backoff so a crash loop is not a
    // creation loop.
    const counted = all.filter(
      (r) => (ACTIVE_REPLICA_STATES.has(r.state) || r.state === 'failed') && !(r.replaces && all.some((o) => o.id === r.replaces && ACTIVE_REPLICA_STATES.has(o.state))),
    );
    const load = input.load(model.name);
    const byLoad = Math.ceil(load.inFlight / (scaling.target_in_flight ?? DEFAULT_TARGET_IN_FLIGHT));
    const idle = load.lastRequestMs === undefined || nowMs - load.lastRequestMs >= (scaling.idle_timeout_s ?? DEFAULT_IDLE_TIMEOUT_S) * 1000;
    const floor = min > 0 ? min : load.waiting > 0 || !idle ? 1 : 0;
    const want = Math.min(Math.max(byLoad, floor), max);
    result.desired.set(model.name, want);

    if (want > counted.length) {
      result.lowSince.delete(model.name);
      if (input.defer?.has(model.name)) continue;
      const avoid = [...mine.filter((r) => r.state === 'failed').flatMap((r) => r.shards.map((s) => s.nodeId)), ...(failedOn.get(model.name) ?? [])];
      for (let missing = want - counted.length; missing > 0; missing--) {
        const outcome = placeFor(model, avoid);
        if (!outcome.placement) break;
        create(model, outcome);
      }
    } else if (want < counted.length) {
      const since = result.lowSince.get(model.name) ?? nowMs;
      result.lowSince.set(model.name, since);
      // Going to zero after the idle timeout needs no second window.
      const delayMs = want === 0 && min === 0 ? 0 : (scaling.scale_down_delay_s ?? DEFAULT_SCALE_DOWN_DELAY_S) * 1000;
      if (nowMs - since < delayMs) continue;
      // Step down what serves least: not yet ready first, then the newest.
      const victims = counted
        .filter((r) => ACTIVE_REPLICA_STATES.has(r.state))
        .sort((a, b) => Number(a.state === 'ready') - Number(b.state === 'ready') || b.createdAtMs - a.createdAtMs)
        .slice(0, counted.length - want);
      for (const v of victims) {
        const reason = want === 0 ? `idle for ${scaling.idle_timeout_s ?? DEFAULT_IDLE_TIMEOUT_S}s (min 0)` : `scaled down to ${want} (in flight ${load.inFlight})`;
        if (v.state === 'ready') stopTakingTraffic(v, reason);
        else drop(v, reason);
      }
      result.lowSince.delete(model.name);
    } else {
      result.lowSince.delete(model.name);
    }
  }

  result.update = [...updated.values()].filter((u) => !removed.has(u.id));
  return result;
}
