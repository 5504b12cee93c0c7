import type { CatalogStatusView, DownloadProgress, ExplainView, ModelView, NodeView, ReplicaView } from '@llmgw/shared';
import { DEFAULT_ROUTING, UNKNOWN_STATE, mbToGb, redactUrl, sourceForViewer, type ModelAdapterView } from '@llmgw/shared';
import type { Controller } from '../controller/controller.js';
import type { InventoryNode } from '../inventory.js';
import type { CatalogStatusSource } from '../catalog/watch.js';
import { ACTIVE_REPLICA_STATES, type Replica } from '../domain.js';
import { indexReservations, reservationsOf } from '../placement/index.js';
import { rolloutStatus } from '../reconcile/rollout.js';
import { adapterProblems } from './adapter-views.js';

/**
 * The LoRA adapters the gateway takes a replica to hold loaded, least recently used first
 * (`Gateway.adapters`); none where no gateway is given (tests mounting the API alone).
 */
export type LoadedAdapters = (replicaId: string) => string[];
const NONE_LOADED: LoadedAdapters = () => [];

/** States in which a replica has an engine running, as far as the server knows. */

/**
 * The admin API's views, built in one place: the JSON API and the dashboard both call
 * these, so the two can never disagree.
 */
export function nodeViews(ctl: Controller, nodes: readonly InventoryNode[] = ctl.inventory.list()): NodeView[] {
  const view = nodeViewer(ctl);
  return nodes.map(view);
}

/** One node's view, or undefined for a node the inventory does not know. */
export function nodeViewOf(ctl: Controller, id: string): NodeView | undefined {
  const n = ctl.inventory.get(id);
  return n ? nodeViewer(ctl)(n) : undefined;
}

/** The fleet's counts for the dashboard's tiles, over every node: no view is built for them. */
export function fleetTotals(ctl: Controller): { nodes: number; readyNodes: number; gpuTotal: number; gpuFree: number } {
  const nowMs = ctl.now();
  const reserved = indexReservations(reservationsOf(ctl.listReplicas()));
  const t = { nodes: 0, readyNodes: 0, gpuTotal: 0, gpuFree: 0 };
  for (const n of ctl.inventory.list()) {
    t.nodes++;
    if (ctl.inventory.liveness(n, nowMs) === 'ready') t.readyNodes++;
    const gpus = n.report?.gpus ?? [];
    const held = reserved.get(n.id);
    t.gpuTotal += gpus.length;
    for (const g of gpus) if (g.problems.length === 0 && !(g.uuid && held?.gpuUuids.has(g.uuid))) t.gpuFree++;
  }
  return t;
}

/** Builds node views against one look at the replicas (what each holds and reserves). */
export function nodeViewer(ctl: Controller): (n: InventoryNode) => NodeView {
  const nowMs = ctl.now();
  const replicas = ctl.listReplicas();
  const shardsOn = new Map<string, number>();
  for (const r of replicas) for (const s of r.shards) shardsOn.set(s.nodeId, (shardsOn.get(s.nodeId) ?? 0) + 1);
  const reserved = indexReservations(reservationsOf(replicas));

  return (n) => {
    const r = n.report;
    const liveness = ctl.inventory.liveness(n, nowMs);
    const gpus = r?.gpus ?? [];
    const held = reserved.get(n.id);
    const healthy = gpus.filter((g) => g.problems.length === 0);
    const v: NodeView = {
      id: n.id,
      ...(r ? { hostname: r.hostname, mgmt_addr: r.mgmt_addr } : {}),
      state: n.admin.state,
      ...(n.admin.reason ? { state_reason: n.admin.reason } : {}),
      liveness,
      labels: r?.labels ?? {},
      ...(r?.pool ? { pool: r.pool } : {}),
      gpu_total: gpus.length,
      // A GPU that is lost or unhealthy is not free, whatever its memory says.
      gpu_free: healthy.filter((g) => !(g.uuid && held?.gpuUuids.has(g.uuid))).length,
      ...(r?.memory_total_mb !== undefined ? { memory_gb: mbToGb(r.memory_total_mb) } : {}),
      ...(held?.memoryMb ? { memory_reserved_gb: mbToGb(held.memoryMb) } : {}),
      gpu_classes: [...new Set(gpus.filter((g) => g.class !== 'unknown').map((g) => g.class))],
      fabrics: r?.fabrics ?? [],
      unhealthy_gpus: gpus.filter((g) => g.problems.length > 0).map((g) => `gpu ${g.index}: ${g.problems.join('; ')}`),
      ...(r?.gpu_error ? { gpu_error: r.gpu_error } : {}),
      ...(n.reported ? { last_seen_s: Math.max(0, Math.round((nowMs - n.lastSeenMs) / 1000)) } : {}),
      ...(r ? { agent_version: r.agent_version } : {}),
      replicas: shardsOn.get(n.id) ?? 0,
      ...(n.admin.state === 'draining' ? { drain_status: drainStatus(n.id, replicas) } : {}),
      ...(n.admin.state === 'draining' && n.admin.drainDeadline ? { drain_deadline: n.admin.drainDeadline } : {}),
      ...(liveness === 'lost' && ctl.paused ? { replacement_paused: ctl.paused } : {}),
    };
    const suspect = ctl.inventory.suspectOf(n, nowMs);
    if (suspect !== undefined) v.suspect = suspect;
    return v;
  };
}

/** What a drain is waiting for, in words, from the replicas still on the node. */
function drainStatus(nodeId: string, replicas: Replica[]): string {
  const here = replicas.filter((r) => r.shards.some((s) => s.nodeId === nodeId));
  if (here.length === 0) return 'drained: no replicas left';
  const parts = here.map((r) => {
    if (r.drainBlocked) return `${r.id} (${r.model}) cannot move: ${r.drainBlocked}`;
    if (r.state === 'draining') return `${r.id} (${r.model}) finishing in-flight requests`;
    const repl = replicas.find((x) => x.replaces === r.id);
    if (repl) return `${r.id} (${r.model}) waiting for replacement ${repl.id} (${repl.state})`;
    return `${r.id} (${r.model}) ${r.state}`;
  });
  return `${here.length} replica${here.length === 1 ? '' : 's'} left: ${parts.join('; ')}`;
}

/**
 * The catalog's models as the API shows them. `admin` sees each source with its
 * credentials masked (`redactUrl`); anyone else only a URL's scheme and host.
 */
export function modelViews(ctl: Controller, admin = false, loaded: LoadedAdapters = NONE_LOADED): ModelView[] {
  const readyOf = new Map<string, Replica[]>();
  const total = new Map<string, number>();
  const active = new Map<string, number>();
  for (const r of ctl.listReplicas()) {
    total.set(r.model, (total.get(r.model) ?? 0) + 1);
    // Ready as every surface shows it: not `unknown` for a node not heard from.
    if (r.state === 'ready' && ctl.unheard(r).length === 0) readyOf.set(r.model, [...(readyOf.get(r.model) ?? []), r]);
    if (ACTIVE_REPLICA_STATES.has(r.state)) active.set(r.model, (active.get(r.model) ?? 0) + 1);
  }
  const revisions = ctl.rollouts.revisions(ctl.models);
  const replicas = ctl.listReplicas();
  return ctl.models.map((m) => {
    const min = m.scaling?.min ?? 1;
    const revision = revisions.get(m.name)!;
    const rollout = rolloutStatus(m, revision, replicas, ctl.rollouts.get(m.name));
    const attempt = ctl.lastAttempt(m.name);
    const activeCount = active.get(m.name) ?? 0;
    const ready = readyOf.get(m.name) ?? [];
    const adapters = m.adapters?.map((a): ModelAdapterView => ({
      name: a.name,
      source: admin ? redactUrl(a.source) : sourceForViewer(a.source),
      loaded_on: ready.filter((r) => loaded(r.id).includes(a.name)).map((r) => r.id),
    }));
    return {
      name: m.name,
      aliases: m.aliases ?? [],
      source: admin ? redactUrl(m.source) : sourceForViewer(m.source),
      min_replicas: min,
      max_replicas: m.scaling?.max ?? Math.max(1, min),
      ready_replicas: ready.length,
      total_replicas: total.get(m.name) ?? 0,
      fallbacks: m.fallbacks ?? [],
      profiles: m.profiles.map((p) => p.name),
      routing: m.routing ?? DEFAULT_ROUTING,
      ...(attempt && activeCount < min ? { placement_summary: attempt.outcome.summary } : {}),
      revision,
      up_to_date: rollout.updated,
      rollout: rollout.state,
      ...(adapters?.length ? { adapters } : {}),
    };
  });
}

/**
 * A replica as the API shows it. `unheard` are the nodes that stopped reporting where
 * the server's probes do not vouch for its engine (`Controller.unheard`): the replica is
 * `unknown`, not `ready`, as are its shards there, and says why. While its engine still
 * serves (`servingSilentS`, the seconds its agent has been silent while the server's
 * probes of the engine answer) it is `ready` with the note `serving, agent silent 42s`.
 */
export function replicaView(
  r: Replica,
  nowMs: number,
  showKeys = false,
  unheard: readonly string[] = [],
  downloadOf: (shardId: string) => DownloadProgress | undefined = () => undefined,
  servingSilentS?: number,
  /** The LoRA adapters it holds loaded (for a replica started with adapters). */
  adapters?: string[],
): ReplicaView {
  const lost = unheard;
  const error = r.error ?? (lost.length ? `node ${lost.join(', ')} stopped reporting: whether its engine still runs is unknown (ctl nodes)` : undefined);
  return {
    id: r.id,
    model: r.model,
    profile: r.profile,
    state: lost.length ? UNKNOWN_STATE : r.state,
    ...(r.pool ? { pool: r.pool } : {}),
    ...(r.fabric ? { fabric: r.fabric } : {}),
    ...(r.endpoint ? { endpoint: r.endpoint } : {}),
    age_seconds: Math.max(0, Math.floor((nowMs - r.createdAtMs) / 1000)),
    ...(error ? { error } : {}),
    ...(servingSilentS !== undefined ? { note: `serving, agent silent ${servingSilentS}s` } : {}),
    ...(r.revision ? { revision: r.revision } : {}),
    ...(showKeys ? { api_key: r.apiKey } : {}),
    ...(adapters ? { adapters } : {}),
    shards: r.shards.map((s) => ({
      id: s.id,
      node: s.nodeId,
      rank: s.rank,
      gpus: s.gpuIndices,
      state: lost.includes(s.nodeId) ? UNKNOWN_STATE : s.state,
      ...(s.port !== undefined ? { port: s.port } : {}),
      ...(s.pid !== undefined ? { pid: s.pid } : {}),
      ...(s.restarts !== undefined ? { restarts: s.restarts } : {}),
      ...(s.error ? { error: s.error } : {}),
      ...withDownload(s.state === 'starting' && !lost.includes(s.nodeId) ? downloadOf(s.id) : undefined),
    })),
  };
}

const withDownload = (d: DownloadProgress | undefined) => (d ? { download: d } : {});

export function replicaViews(ctl: Controller, model?: string, showKeys = false, loaded: LoadedAdapters = NONE_LOADED): ReplicaView[] {
  const nowMs = ctl.now();
  return ctl
    .listReplicas()
    .filter((r) => !model || r.model === model)
    .map((r) =>
      replicaView(
        r,
        nowMs,
        showKeys,
        ctl.unheard(r),
        (id) => ctl.downloads.of(id),
        ctl.serving(r).silentS,
        r.spec?.adapters?.length ? loaded(r.id) : undefined,
      ),
    );
}

/**
 * Why a model is or is not placed, from the reconciler's latest attempt; with `adapter`
 * (a LoRA adapter of `model` was asked about), why that adapter cannot be served too.
 */
export function explainView(ctl: Controller, model: string, adapter?: string): ExplainView {
  const view = modelExplainView(ctl, model);
  return adapter === undefined ? view : { ...view, adapter: { name: adapter, problems: adapterProblems(ctl, model, adapter) } };
}

function modelExplainView(ctl: Controller, model: string): ExplainView {
  const placed = ctl.listReplicas().some((r) => r.model === model && ACTIVE_REPLICA_STATES.has(r.state));
  const attempt = ctl.lastAttempt(model);
  // Placed is not started: a replica whose file is still coming says so here too.
  const downloads: NonNullable<ExplainView['downloads']> = [];
  for (const r of ctl.listReplicas()) {
    if (r.model !== model || r.state !== 'starting') continue;
    for (const s of r.shards) {
      const progress = ctl.downloads.of(s.id);
      if (progress) downloads.push({ replica: r.id, node: s.nodeId, progress });
    }
  }
  const coming = downloads.length ? { downloads } : {};
  if (!attempt) return { model, placed, attempted: false, notes: [], rejections: [], ...coming };
  return {
    ...coming,
    model,
    placed,
    attempted: true,
    summary: attempt.outcome.summary,
    reasons: attempt.outcome.reasons,
    attempted_at: new Date(attempt.atMs).toISOString(),
    notes: attempt.outcome.notes,
    rejections: attempt.outcome.rejections,
  };
}

/** The catalog in force and the latest failed reload, until a good one (`GET /api/v1/catalog`). */
export function catalogStatusView(source: CatalogStatusSource | undefined, nowMs: number): CatalogStatusView {
  if (!source) return { models: 0 };
  const failure = source.failure;
  return {
    file: source.current.file,
    models: source.current.models.length,
    loaded_at: new Date(source.loadedAtMs).toISOString(),
    ...(failure
      ? {
          reload_error: {
            at: new Date(failure.atMs).toISOString(),
            age_s: Math.max(0, Math.floor((nowMs - failure.atMs) / 1000)),
            problems: failure.error.problems.map((p) => ({
              message: p.message,
              file: p.file,
              ...(p.model !== undefined ? { model: p.model } : {}),
              ...(p.field !== undefined ? { field: p.field } : {}),
              ...(p.line !== undefined ? { line: p.line } : {}),
              problem: p.problem,
            })),
            more: failure.error.more,
          },
        }
      : {}),
  };
}
