import { formatGb, gbToMb, mbToGb } from '@llmgw/shared';
import type { GpuReport, RejectionCode } from '@llmgw/shared';
import { reject, said, tell, type Category, type Detail } from './detail.js';
import type { NodeSnapshot, PlacementNote, Reservation } from '../snapshot.js';
import { classOk, gpuMemOk, healthy, serves, type Requirement } from './requirement.js';
import type { NodeUsage } from './reservations.js';

/**
 * The placement checks, each declared once: its summary categories (with their codes),
 * whether it is static, how a node fits it and how a failure is explained. The fast path
 * (fleet.ts, select.ts) and the explanation (explain.ts) both run this table; a new check
 * is one entry in `CHECKS`.
 *
 * *Static* checks depend only on the snapshot: a prepared fleet decides them once per
 * profile. *Dynamic* checks compare what is left of a resource after reservations with
 * what the profile needs; each keeps a column of that figure per candidate, which
 * reservations update and the fast path reads (the columns also rank candidates).
 */

// The explanation's vocabulary lives in detail.ts; a check table of a test's own imports it from here.
export { NO_CATEGORY, reject, type Category, type Detail } from './detail.js';

interface Declared {
  /** The summary categories it can count a node under; `explain` names them by position. */
  categories(req: Requirement): Category[];
  /** False when `req` asks nothing of it: the check is then left out of the plan. */
  applies(req: Requirement): boolean;
  /**
   * Records every reason `node` fails, called only when it does (unless `explainsPass`).
   * The slow path: reasons are strings built here and never for nodes that pass.
   */
  explain(node: NodeSnapshot, usage: NodeUsage | undefined, req: Requirement, d: Detail): void;
  /**
   * True when `explain` also decides: it records nothing for a node that passes, so the
   * explain pass calls it without asking `fits`/`left` first (one walk over the node,
   * not two). The fast path still decides by `fits`/`left`; the property tests compare
   * the two verdicts.
   */
  explainsPass?: true;
  /**
   * Says what it could not check on a node it let through (a figure the agent did not
   * report: unknown is not zero); `gpus` are the GPUs chosen there, if any.
   */
  notes?(node: NodeSnapshot, req: Requirement, gpus: readonly GpuReport[], out: PlacementNote[]): void;
}

/** Reservations cannot change its verdict. */
export interface StaticCheck extends Declared {
  static: true;
  /** No allocation, no `this` (read out of the check once per view): run on every node once per profile. */
  fits: (node: NodeSnapshot, req: Requirement) => boolean;
}

/** A resource reservations hold: a node fits while what is left covers the need. */
export interface DynamicCheck extends Declared {
  static: false;
  /**
   * What its column holds: `count`, whole numbers (GPUs), kept in an Int32Array; or
   * `amount`, any figure including Infinity for unknown (memory), in a Float64Array.
   * The hot loop reads integers faster than doubles, so a check that counts says so
   * (the GPU and memory columns are fields of the view, typed to match: fleet.ts checks).
   */
  column: 'count' | 'amount';
  need(req: Requirement): number;
  /** What is left for `req` after `usage` (none: the node's whole capacity); Infinity when unknown. */
  left(node: NodeSnapshot, usage: NodeUsage | undefined, req: Requirement): number;
  /**
   * How much reservation `r` lowers what `left` says, given `before`, the node's usage
   * without it. `reserve` subtracts this rather than calling `left` again, so a decision
   * costs a few subtractions per profile, not a walk over every GPU of the node (a CPU
   * replica takes nothing from a GPU column). Must agree with `left`: the property
   * tests compare the two paths.
   */
  taken(node: NodeSnapshot, r: Reservation, before: NodeUsage | undefined, req: Requirement): number;
}

export type Check = StaticCheck | DynamicCheck;

function say(out: PlacementNote[], req: Requirement, node: NodeSnapshot, note: string): void {
  out.push({ profile: req.profile.name, node: node.id, note });
}

const fmtGbFigure = (gb: number): string => formatGb(gbToMb(gb));

const same = (rank: number, code: RejectionCode, phrase: string): Category => ({ rank, code, one: phrase, many: phrase });
const always = (): boolean => true;

const liveness: StaticCheck = {
  static: true,
  categories: () => [same(0, 'not_ready', 'not reporting')],
  applies: always,
  fits: (node) => node.liveness === 'ready',
  explain(node, _usage, _req, d) {
    reject(d, 0, `has not reported for ${Math.round(node.lastSeenAgoS)}s`);
  },
};

const admin: StaticCheck = {
  static: true,
  categories: () => [same(10, 'cordoned', 'cordoned'), same(20, 'draining', 'draining'), same(5, 'pending_approval', 'waiting for approval')],
  applies: always,
  fits: (node) => node.admin === 'ready',
  explain(node, _usage, _req, d) {
    const why = node.adminReason ? ` (${node.adminReason})` : '';
    if (node.admin === 'cordoned') reject(d, 0, `is cordoned${why}`);
    else if (node.admin === 'pending-approval') reject(d, 2, `is waiting for approval (ctl nodes approve ${node.id})`);
    else reject(d, 1, `is draining${why}`);
  },
};

/** One category per selector entry, in the selector's order. */
const labels: StaticCheck = {
  static: true,
  categories: (req) =>
    req.selKeys.map((key, k) => ({
      rank: 30,
      code: 'label',
      one: `lacks label ${key}=${req.selVals[k]}`,
      many: `lack label ${key}=${req.selVals[k]}`,
    })),
  applies: (req) => req.selKeys.length > 0,
  fits(node, req) {
    // selKeys and selVals are parallel.
    for (let k = 0; k < req.selKeys.length; k++) if (node.labels[req.selKeys[k]!] !== req.selVals[k]) return false;
    return true;
  },
  explain(node, _usage, req, d) {
    // selKeys, selVals and selPairs are parallel.
    for (let k = 0; k < req.selKeys.length; k++) {
      const key = req.selKeys[k]!;
      const have = node.labels[key];
      if (have === req.selVals[k]) continue;
      const pair = req.selPairs[k]!;
      if (have === undefined) reject(d, k, req.selLacks[k]!, pair);
      else {
        const s = said(d, k, have) ?? tell(d, k, have, `has label ${key}=${have}, needs ${pair}`, `${key}=${have}`);
        reject(d, k, s.reason, pair, s.available);
      }
    }
  },
};

/**
 * `engine: command` runs whatever argv the catalog names, so an agent runs it only when
 * its operator allowed it (`--allow-command-engine`); placing such a profile elsewhere
 * would only produce a failed replica. Agents that do not say (older ones) ran it.
 */
const commandEngine: StaticCheck = {
  static: true,
  categories: () => [{ rank: 35, code: 'command_engine', one: 'does not allow engine: command', many: 'do not allow engine: command' }],
  applies: (req) => req.profile.engine === 'command',
  fits: (node) => node.allowsCommandEngine !== false,
  explain(_node, _usage, _req, d) {
    reject(d, 0, 'does not allow engine: command (start its agent with --allow-command-engine)');
  },
};

const fabric: StaticCheck = {
  static: true,
  categories: (req) => [{ rank: 70, code: 'fabric', one: `lacks fabric ${req.fabric ?? ''}`, many: `lack fabric ${req.fabric ?? ''}` }],
  applies: (req) => req.fabric !== undefined,
  fits: (node, req) => node.fabrics.includes(req.fabric as string),
  explain(node, _usage, req, d) {
    reject(d, 0, `lacks fabric ${req.fabric}`, req.fabric, node.fabrics.length > 0 ? node.fabrics.join(',') : undefined);
  },
};

/** CPU cores. A node that did not report them is not excluded: it gets a note instead. */
const cpuCores: StaticCheck = {
  static: true,
  categories: () => [same(95, 'cpu_cores', 'too few CPU cores')],
  applies: (req) => (req.profile.min_cpu_cores ?? 0) > 0,
  fits: (node, req) => node.cpuCores === undefined || node.cpuCores >= (req.profile.min_cpu_cores as number),
  explain(node, _usage, req, d) {
    const need = req.profile.min_cpu_cores as number;
    reject(d, 0, `has ${node.cpuCores} CPU ${node.cpuCores === 1 ? 'core' : 'cores'}, needs ${need}`, need, node.cpuCores);
  },
  notes(node, req, _gpus, out) {
    if (node.cpuCores !== undefined) return;
    say(out, req, node, `CPU cores unknown (agent did not report them); min_cpu_cores ${req.profile.min_cpu_cores} not checked`);
  },
};

/** Host memory. A node that did not report it is not excluded: it gets a note instead. */
const memory: DynamicCheck = {
  static: false,
  column: 'amount',
  categories: () => [same(100, 'memory', 'too little memory')],
  applies: (req) => req.needMemMb > 0,
  need: (req) => req.needMemMb,
  left: (node, usage) => (node.memoryTotalMb ?? Infinity) - (usage === undefined ? 0 : usage.memoryMb),
  taken: (_node, r) => r.memoryMb,
  explain(node, usage, req, d) {
    const total = node.memoryTotalMb as number;
    const reserved = usage === undefined ? 0 : usage.memoryMb;
    const need = req.needMemText;
    const n = usage === undefined ? 0 : usage.replicas.size;
    const reason =
      reserved > 0
        ? `has ${formatGb(total)} GiB of memory, ${formatGb(reserved)} reserved by ${n} ${n === 1 ? 'replica' : 'replicas'}, needs ${need}`
        : (said(d, 0, total) ?? tell(d, 0, total, `has ${formatGb(total)} GiB of memory, needs ${need}`, undefined)).reason;
    reject(d, 0, reason, mbToGb(req.needMemMb), mbToGb(Math.max(0, total - reserved)));
  },
  notes(node, req, _gpus, out) {
    if (node.memoryTotalMb !== undefined) return;
    const need = fmtGbFigure(req.profile.min_memory_gb ?? 0);
    say(out, req, node, `memory unknown (agent did not report it); min_memory_gb ${need} not checked`);
  },
};

/**
 * GPUs that can serve a shard (see `serves`) and are not reserved. For a CPU profile it
 * asks nothing, but its column still ranks candidates (CPU work goes to CPU machines).
 * Explained by the first thing the node lacks: GPUs, the class, the memory, then health
 * and free count. Explaining counts the free GPUs anyway, so it also decides
 * (`explainsPass`): the explain pass walks a node's GPUs once.
 */
const gpus: DynamicCheck = {
  static: false,
  column: 'count',
  categories: (req) => [
    same(40, 'gpu_count', 'without GPUs'),
    same(50, 'gpu_class', `without ${req.profile.gpu_class && req.classes ? req.profile.gpu_class.join(' or ') : 'suitable'} GPUs`),
    same(60, 'gpu_memory', 'too little GPU memory'),
    same(80, 'gpu_health', 'short of healthy GPUs'),
    same(90, 'gpu_count', 'too few free GPUs'),
  ],
  applies: (req) => req.gpus > 0,
  need: (req) => req.gpus,
  taken(node, r, before, req) {
    if (r.gpuUuids.length === 0) return 0;
    const held = before === undefined || before.gpuUuids.size === 0 ? undefined : before.gpuUuids;
    let n = 0;
    for (const g of node.gpus) {
      if (g.uuid === undefined || !r.gpuUuids.includes(g.uuid) || (held !== undefined && held.has(g.uuid))) continue;
      if (serves(req, g)) n++;
    }
    return n;
  },
  left(node, usage, req) {
    const held = usage === undefined || usage.gpuUuids.size === 0 ? undefined : usage.gpuUuids;
    const list = node.gpus;
    let n = 0;
    // Indexed, not for…of: this runs for every GPU of every node once per profile view.
    for (let i = 0; i < list.length; i++) {
      const g = list[i]!;
      if (serves(req, g) && !(held !== undefined && held.has(g.uuid as string))) n++;
    }
    return n;
  },
  explain: explainGpus,
  explainsPass: true,
  notes(node, req, gpus, out) {
    if (req.needGpuMb === 0) return;
    const need = fmtGbFigure(req.profile.min_gpu_memory_gb ?? 0);
    for (const g of gpus) {
      if (g.memory_total_mb !== undefined) continue;
      say(out, req, node, `GPU ${g.index} memory unknown (agent did not report it); min_gpu_memory_gb ${need} not checked`);
    }
  },
};

function explainGpus(node: NodeSnapshot, usage: NodeUsage | undefined, req: Requirement, d: Detail): void {
  const list = node.gpus;
  if (list.length === 0) {
    reject(d, 0, 'has no GPUs', req.gpus, 0);
    return;
  }
  const held = usage?.gpuUuids;
  // One walk that counts, allocating nothing: this runs for every node that fails a
  // profile statically, most of which it passes or fails on the class alone. The lists a
  // reason names are gathered only for a node that fails on them.
  let classMatches = 0;
  let largestMb = -1;
  let eligible = 0;
  let free = 0;
  let sick = 0;
  for (const g of list) {
    if (!classOk(req, g.class)) continue;
    classMatches++;
    if (g.memory_total_mb !== undefined && g.memory_total_mb > largestMb) largestMb = g.memory_total_mb;
    if (!gpuMemOk(req, g)) continue;
    eligible++;
    if (g.uuid !== undefined && held !== undefined && held.has(g.uuid)) continue;
    if (healthy(g)) free++;
    else sick++;
  }
  if (req.classes !== undefined && classMatches === 0) {
    rejectClasses(list, req, d);
    return;
  }
  if (eligible === 0) {
    const reason = `has ${formatGb(largestMb)} GiB GPUs, needs ${formatGb(req.needGpuMb)}`;
    reject(d, 2, reason, mbToGb(req.needGpuMb), mbToGb(largestMb));
    return;
  }
  // What `left` counts: GPUs that serve (class, memory, healthy) and are not held.
  if (free >= req.gpus) return;
  const kinds: string[] = [];
  for (const g of list) {
    if (!classOk(req, g.class) || !gpuMemOk(req, g)) continue;
    if (!kinds.includes(g.class)) kinds.push(g.class);
    // Unhealthy GPUs are named only when they are what makes the node short; on a node
    // that is short anyway they are noise.
    if (free + sick < req.gpus || healthy(g) || (g.uuid !== undefined && held !== undefined && held.has(g.uuid))) continue;
    const problem = g.problems.length > 0 ? g.problems.join('; ') : 'no UUID reported';
    reject(d, 3, `GPU ${g.index} is unhealthy: ${problem}`);
  }
  const kind = kinds.join('/');
  const have = free === 0 ? `no free ${kind} GPUs` : `${free} free ${kind} ${free === 1 ? 'GPU' : 'GPUs'}`;
  reject(d, 4, `has ${have}, needs ${req.gpus}`, req.gpus, free);
}

/** A node none of whose GPUs is of a class the profile accepts: its classes, in order. */
function rejectClasses(list: readonly GpuReport[], req: Requirement, d: Detail): void {
  // Keyed by the class when the node has one (the common case), so alike nodes build no strings.
  const first = list[0]!.class; // callers pass a node with GPUs
  let one: string | undefined = first;
  for (const g of list) if (g.class !== first) one = undefined;
  let s = one === undefined ? undefined : said(d, 1, one);
  if (s === undefined) {
    const nodeClasses: string[] = [];
    for (const g of list) if (!nodeClasses.includes(g.class)) nodeClasses.push(g.class);
    s = { reason: `has ${nodeClasses.join(' and ')} GPUs, needs ${req.classesText}`, available: nodeClasses.join(',') };
    if (one !== undefined) tell(d, 1, one, s.reason, s.available);
  }
  reject(d, 1, s.reason, req.classesList, s.available);
}

/** Every check, in the order a node's reasons are listed. */
export const CHECKS: readonly Check[] = [liveness, admin, labels, commandEngine, fabric, cpuCores, memory, gpus];

/**
 * The two dynamic checks every profile view keeps a column for, applying or not: the
 * selection rule ranks by them (see select.ts). Any other keeps one where it applies.
 */
export const GPU_CHECK: DynamicCheck = gpus;
export const MEMORY_CHECK: DynamicCheck = memory;

/** The table compiled for one requirement: what the fast path and explain iterate. */
export interface Plan {
  /** The checks that apply, in table order. */
  checks: Check[];
  statics: StaticCheck[];
  /** The applying checks that may leave notes. */
  noting: Check[];
  /** Per applying check, what its `need` says (0 for a static check): read per node when explaining. */
  need: Float64Array;
  /** The applying dynamic checks other than GPU_CHECK and MEMORY_CHECK, in table order. */
  extra: DynamicCheck[];
  /** Summary categories of the applying checks, most telling first. */
  cats: Category[];
  /** Per applying check, its categories' positions in `cats`. */
  slots: Int32Array[];
}

/** Compiles `table` (CHECKS unless a test brings its own) for `req`; once per profile per prepared fleet. */
export function planFor(req: Requirement, table: readonly Check[] = CHECKS): Plan {
  const checks = table.filter((c) => c.applies(req));
  const listed = checks.flatMap((c, i) => c.categories(req).map((cat, local) => ({ cat, i, local })));
  // Stable: equal ranks (a selector's labels) keep their order.
  listed.sort((a, b) => a.cat.rank - b.cat.rank);
  const slots = checks.map((c) => new Int32Array(c.categories(req).length));
  // l.i indexes `checks`, l.local that check's categories.
  listed.forEach((l, slot) => (slots[l.i]![l.local] = slot));
  return {
    checks,
    statics: checks.filter((c): c is StaticCheck => c.static),
    noting: checks.filter((c) => c.notes !== undefined),
    need: Float64Array.from(checks, (c) => (c.static ? 0 : c.need(req))),
    extra: checks.filter((c): c is DynamicCheck => !c.static && c !== gpus && c !== memory),
    cats: listed.map((l) => l.cat),
    slots,
  };
}
