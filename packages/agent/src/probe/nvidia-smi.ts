import { execFile } from 'node:child_process';
import type { GpuReport } from '@llmgw/shared';

/** Fallback for drivers that reject one of the health fields: identity and memory only. */
export const GPU_QUERY_FIELDS_MINIMAL = ['index', 'uuid', 'name', 'pci.bus_id', 'memory.total', 'memory.used'] as const;

/**
 * GPU inventory and health from `nvidia-smi` (reference/agent.md §1).
 *
 * Field choice: identity and memory (index, uuid, name, pci.bus_id, memory.total,
 * memory.used) are supported by every driver that has `--query-gpu`. The three health
 * fields are the ones that take a GPU out of service without a kernel log:
 * uncorrected volatile ECC errors, pending page retirement (pre-Ampere) and failed row
 * remapping (Ampere and later). Each prints `[N/A]` where it does not apply, which is
 * harmless. Telemetry (power, clocks, throttle reasons) is left out because it is not
 * needed for placement and the throttle-reason field was renamed across drivers: one
 * unknown field fails the whole query.
 */
export const GPU_QUERY_FIELDS = [
  ...GPU_QUERY_FIELDS_MINIMAL,
  'ecc.errors.uncorrected.volatile.total',
  'retired_pages.pending',
  'remapped_rows.failure',
] as const;

/** Arguments for one inventory query with the given fields. */
export function gpuQueryArgs(fields: readonly string[]): string[] {
  return [`--query-gpu=${fields.join(',')}`, '--format=csv,noheader,nounits'];
}

/** nvidia-smi exit codes (man page, "RETURN VALUE"). */
export const NVIDIA_SMI_EXIT_CODES: Readonly<Record<number, string>> = {
  0: 'success',
  2: 'invalid argument',
  3: 'not available on this device',
  4: 'no permission',
  6: 'object not found',
  8: 'power cables not attached',
  9: 'driver not loaded',
  10: 'IRQ issue',
  12: 'NVML library not found',
  13: 'function not implemented',
  14: 'infoROM corrupted',
  15: 'GPU has fallen off the bus or is otherwise inaccessible',
  255: 'other error',
};

/** "exit 9: driver not loaded", or just "exit 42" for a code without a documented meaning. */
export function describeExit(code: number): string {
  const meaning = NVIDIA_SMI_EXIT_CODES[code];
  return meaning === undefined ? `exit ${code}` : `exit ${code}: ${meaning}`;
}

/** The problem recorded for a GPU that nvidia-smi can no longer open. */
export const LOST_GPU_PROBLEM = 'fell off the bus (Unable to determine the device handle)';

/** Outcome of one inventory query. */
export interface GpuQueryResult {
  gpus: GpuReport[];
  /** Set when the output as a whole says there are no usable GPUs. */
  nodeError?: string;
  /** Things worth logging that do not by themselves make a GPU or the node unusable. */
  warnings: string[];
}

/** True for the sentinels nvidia-smi prints instead of a value: `[N/A]`, `[Unknown Error]`, `N/A`. */
export function isUnknownValue(value: string): boolean {
  const v = value.trim();
  return v === '' || v === 'N/A' || /^\[.*\]$/.test(v);
}

function knownString(value: string | undefined): string | undefined {
  if (value === undefined || isUnknownValue(value)) return undefined;
  return value.trim();
}

/** A non-negative integer, tolerating a `MiB` unit in case `nounits` was dropped. */
function knownCount(value: string | undefined): number | undefined {
  const v = knownString(value);
  if (v === undefined) return undefined;
  const m = /^(\d+)(?:\s*MiB)?$/.exec(v);
  if (!m) return undefined;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * Bus ids come as `00000000:18:00.0` from the query and as `0000:18:00.0` in error
 * lines; one form (8-digit domain, upper case) lets them be matched.
 */
export function normaliseBusId(busId: string): string {
  const m = /^([0-9A-Fa-f]+):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.([0-9A-Fa-f]))?$/.exec(busId.trim());
  if (!m) return busId.trim();
  const [, domain, bus, device, fn] = m;
  return `${domain.padStart(8, '0')}:${bus}:${device}.${fn ?? '0'}`.toUpperCase();
}

/** Names without a size in them that NVIDIA sells in more than one memory size. */
const MULTI_SIZE_MODELS = /^(?:V100|A100|A800|H100|H800|H200|H20|GH200|B100|B200|GB200|B300)$/i;
/** Brand words that say nothing about capability. */
const BRAND_WORDS = /^(?:NVIDIA|Tesla|GeForce|Quadro)$/i;
/** Form factor and memory-type words: an SXM and a PCIe A100-80GB place the same. */
const PACKAGING_WORDS = /^(?:SXM\d*|PCIe|HBM\d*e?|NVL|Generation)$/i;
const SIZE_WORD = /^(\d+)GB$/i;

/**
 * A short class for a GPU name, used by profiles' `gpu_class`: brand and packaging
 * words dropped, the model kept, and the memory size appended where the model comes
 * in several sizes ("NVIDIA A100-SXM4-40GB" → "A100-40GB", "NVIDIA GeForce RTX 4090" →
 * "RTX-4090", "NVIDIA H200" with 143771 MiB → "H200-141GB"). "unknown" for no name.
 */
export function gpuClass(name: string, memoryMb?: number): string {
  if (isUnknownValue(name) || name.trim().toLowerCase() === 'unknown') return 'unknown';
  const words = name.trim().split(/[\s-]+/).filter((w) => w !== '');
  let size: string | undefined;
  const model: string[] = [];
  for (const w of words) {
    const sized = SIZE_WORD.exec(w);
    if (sized) {
      size ??= `${sized[1]}GB`;
    } else if (!BRAND_WORDS.test(w) && !PACKAGING_WORDS.test(w)) {
      model.push(w);
    }
  }
  if (model.length === 0) return 'unknown';
  // Marketing sizes are GiB rounded up: 81559 MiB → 80, 143771 → 141, 95830 → 94.
  if (size === undefined && model.length === 1 && MULTI_SIZE_MODELS.test(model[0]) && memoryMb && memoryMb > 0) {
    size = `${Math.ceil(memoryMb / 1024)}GB`;
  }
  return size === undefined ? model.join('-') : `${model.join('-')}-${size}`;
}

/** Health problems from one row's health columns; empty when healthy or unknown. */
export function rowProblems(row: Readonly<Record<string, string>>): string[] {
  const problems: string[] = [];
  const ecc = knownCount(row['ecc.errors.uncorrected.volatile.total']);
  if (ecc !== undefined && ecc > 0) {
    problems.push(`${ecc} uncorrectable ECC ${ecc === 1 ? 'error' : 'errors'}`);
  }
  if (knownString(row['retired_pages.pending'])?.toLowerCase() === 'yes') {
    problems.push('retired pages pending');
  }
  if (knownString(row['remapped_rows.failure'])?.toLowerCase() === 'yes') {
    problems.push('row remapping failed');
  }
  return problems;
}

/** One CSV row as a GPU, or undefined when the line is not a row of this query. */
export function parseGpuRow(line: string, fields: readonly string[]): GpuReport | undefined {
  const cells = line.split(', ');
  if (cells.length !== fields.length) return undefined;
  const row: Record<string, string> = {};
  fields.forEach((f, i) => {
    row[f] = cells[i].trim();
  });
  const index = knownCount(row['index']);
  if (fields.includes('index') && index === undefined) return undefined;
  const name = knownString(row['name']) ?? 'unknown';
  const memoryTotal = knownCount(row['memory.total']);
  const gpu: GpuReport = {
    index: index ?? 0,
    name,
    class: gpuClass(name, memoryTotal),
    problems: rowProblems(row),
  };
  const uuid = knownString(row['uuid']);
  if (uuid !== undefined) gpu.uuid = uuid;
  const busId = knownString(row['pci.bus_id']);
  if (busId !== undefined) gpu.bus_id = normaliseBusId(busId);
  if (memoryTotal !== undefined) gpu.memory_total_mb = memoryTotal;
  const memoryUsed = knownCount(row['memory.used']);
  if (memoryUsed !== undefined) gpu.memory_used_mb = memoryUsed;
  return gpu;
}

const LOST_LINE = /Unable to determine the device handle for GPU|GPU is lost/i;
const LOST_BUS_ID = /GPU\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)/;

/**
 * A lost-GPU error line ("Unable to determine the device handle for GPU
 * 0000:4F:00.0: Unknown Error", "...: GPU is lost. Reboot the system ...").
 * Returns the bus id when the line names one, `{}` for a lost line without one, and
 * undefined for any other line.
 */
export function parseLostGpuLine(line: string): { busId?: string } | undefined {
  if (!LOST_LINE.test(line)) return undefined;
  const m = LOST_BUS_ID.exec(line);
  return m ? { busId: normaliseBusId(m[1]) } : {};
}

/** Text that means "no usable GPUs on this node", checked only when no GPU was listed. */
const NODE_FAILURES: ReadonlyArray<{ match: RegExp; message: string }> = [
  {
    match: /couldn't communicate with the NVIDIA driver/i,
    message: 'NVIDIA driver not loaded: nvidia-smi could not communicate with the driver',
  },
  {
    match: /Driver\/library version mismatch/i,
    message: 'NVIDIA driver/library version mismatch: the driver was upgraded without a reboot',
  },
  { match: /No devices were found/i, message: 'nvidia-smi found no GPUs: No devices were found' },
  { match: /NVML Shared Library Not Found|NVML library not found/i, message: 'NVML library not found' },
  { match: /is not a valid field to query/i, message: 'nvidia-smi rejected the query fields' },
];

function firstLine(text: string): string | undefined {
  const line = text.split('\n').map((l) => l.trim()).find((l) => l !== '');
  return line === undefined ? undefined : line.slice(0, 300);
}

/** The node-level error for output that listed no GPU at all. */
export function nodeFailureMessage(output: string, exitCode: number): string {
  const known = NODE_FAILURES.find((f) => f.match.test(output));
  if (known) return `${known.message} (${describeExit(exitCode)})`;
  const nvml = /Failed to initialize NVML:\s*(.*)/i.exec(output);
  if (nvml) return `NVML failed to initialise: ${nvml[1].trim()} (${describeExit(exitCode)})`;
  const line = firstLine(output);
  if (exitCode === 0) return `nvidia-smi listed no GPUs${line ? `: ${line}` : ''}`;
  return `nvidia-smi failed (${describeExit(exitCode)})${line ? `: ${line}` : ' with no output'}`;
}

interface LostEntry {
  busId?: string;
  /** Position among stdout's GPU lines; absent when the line came on stderr. */
  position?: number;
}

function smallestFree(used: ReadonlySet<number>): number {
  let i = 0;
  while (used.has(i)) i++;
  return i;
}

/**
 * Parses `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`.
 *
 * Rows are accepted whatever the exit code, because a lost GPU (rc 15) or a corrupt
 * infoROM (rc 14) still comes with valid rows for the other GPUs. A lost-GPU line
 * becomes a GPU with no uuid and a problem, indexed by its position among the GPU
 * lines; where that cannot be known (the line came on stderr, or the driver already
 * re-indexed the rest) it takes the smallest index no row uses. Only when no GPU at
 * all is listed does the output become a node-level error.
 */
export function parseGpuQuery(
  stdout: string,
  stderr: string,
  exitCode: number,
  fields: readonly string[] = GPU_QUERY_FIELDS,
): GpuQueryResult {
  const warnings: string[] = [];
  const rows: GpuReport[] = [];
  const lost: LostEntry[] = [];
  const header = fields.join(', ');

  const scan = (text: string, fromStdout: boolean): void => {
    let position = 0;
    for (const raw of text.split('\n')) {
      const line = raw.trim();
      if (line === '' || line === header) continue;
      const gpu = parseGpuRow(line, fields);
      if (gpu) {
        rows.push(gpu);
        position++;
        continue;
      }
      const lostLine = parseLostGpuLine(line);
      if (lostLine) {
        lost.push({ ...lostLine, ...(fromStdout ? { position } : {}) });
        position++;
        continue;
      }
      warnings.push(line.slice(0, 300));
    }
  };
  scan(stdout, true);
  scan(stderr, false);

  const byUuid = new Map<string, GpuReport>();
  const gpus: GpuReport[] = [];
  for (const gpu of rows) {
    if (gpu.uuid !== undefined) {
      if (byUuid.has(gpu.uuid)) {
        warnings.push(`nvidia-smi listed GPU ${gpu.uuid} twice; kept the first row`);
        continue;
      }
      byUuid.set(gpu.uuid, gpu);
    }
    gpus.push(gpu);
  }

  const accepted = gpus.length;
  const used = new Set(gpus.map((g) => g.index));
  const seenLostBus = new Set<string>();
  for (const entry of lost) {
    if (entry.busId !== undefined) {
      if (seenLostBus.has(entry.busId)) continue;
      seenLostBus.add(entry.busId);
      // A GPU can be listed and then fail a later call within the same query.
      const listed = gpus.find((g) => g.bus_id === entry.busId);
      if (listed) {
        if (!listed.problems.includes(LOST_GPU_PROBLEM)) listed.problems.push(LOST_GPU_PROBLEM);
        continue;
      }
    }
    const index = entry.position !== undefined && !used.has(entry.position) ? entry.position : smallestFree(used);
    used.add(index);
    const gpu: GpuReport = { index, name: 'unknown', class: 'unknown', problems: [LOST_GPU_PROBLEM] };
    if (entry.busId !== undefined) gpu.bus_id = entry.busId;
    gpus.push(gpu);
  }
  gpus.sort((a, b) => a.index - b.index);

  if (gpus.length === 0) {
    return { gpus, nodeError: nodeFailureMessage(`${stdout}\n${stderr}`, exitCode), warnings: [] };
  }
  if (exitCode !== 0) {
    warnings.unshift(`nvidia-smi exited with a failure (${describeExit(exitCode)}); accepted the ${accepted} GPU rows it printed`);
  }
  return { gpus, warnings };
}

/** True when the output says a query field is unknown to this driver. */
export function isInvalidFieldError(output: string): boolean {
  return /is not a valid field to query/i.test(output);
}

/**
 * True when `nvidia-smi topo -m` shows an NVLink (`NV<n>`) between any two GPUs.
 * Columns are matched to the header by position; the header has no row label, so it
 * starts with an empty cell (a leading tab, or nothing when the output is not tabbed).
 */
export function parseTopoNvlink(text: string): boolean {
  const lines = text.split('\n').map((l) => l.replace(/\r$/, ''));
  const split = (line: string): string[] =>
    line.includes('\t') ? line.split('\t').map((c) => c.trim()) : line.trim().split(/\s+/);
  // The header is the first line that names a GPU; rows come after it.
  const headerLine = lines.find((l) => /(^|\s)GPU\d+(\s|$)/.test(l));
  if (headerLine === undefined) return false;
  const header = split(headerLine);
  if (header[0] !== '') header.unshift('');
  const gpuColumns = header.flatMap((label, i) => (/^GPU\d+$/.test(label) ? [i] : []));
  for (const line of lines) {
    const cells = split(line);
    if (!/^GPU\d+$/.test(cells[0] ?? '')) continue;
    if (gpuColumns.some((i) => /^NV\d+$/.test(cells[i] ?? ''))) return true;
  }
  return false;
}

/** How one nvidia-smi invocation ended. */
export type RunOutcome =
  | { kind: 'exited'; stdout: string; stderr: string; exitCode: number }
  | { kind: 'missing' }
  | { kind: 'timeout' }
  | { kind: 'failed'; message: string };

/** Extra wait after the kill before giving up on the callback. */
const KILL_GRACE_MS = 2000;

/**
 * Runs a command and reports how it ended, never rejecting. NVML can hang on a wedged
 * GPU in uninterruptible sleep, where even SIGKILL does not end the process and
 * execFile's callback never comes; a timer of our own bounds the wait regardless.
 */
export function runCommand(file: string, args: readonly string[], timeoutMs: number): Promise<RunOutcome> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: RunOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(backstop);
      resolve(outcome);
    };
    const backstop = setTimeout(() => settle({ kind: 'timeout' }), timeoutMs + KILL_GRACE_MS);
    try {
      execFile(
        file,
        [...args],
        { timeout: timeoutMs, killSignal: 'SIGKILL', encoding: 'utf8', maxBuffer: 8 * 1024 * 1024, windowsHide: true },
        (err, stdout, stderr) => {
          if (!err) return settle({ kind: 'exited', stdout, stderr, exitCode: 0 });
          const e = err as NodeJS.ErrnoException & { killed?: boolean; signal?: NodeJS.Signals | null };
          if (e.code === 'ENOENT') return settle({ kind: 'missing' });
          if (e.killed) return settle({ kind: 'timeout' });
          if (typeof e.code === 'number') return settle({ kind: 'exited', stdout, stderr, exitCode: e.code });
          if (e.signal) return settle({ kind: 'failed', message: `nvidia-smi was killed by ${e.signal}` });
          return settle({ kind: 'failed', message: `nvidia-smi could not be run: ${e.code ?? e.message}` });
        },
      );
    } catch (err) {
      settle({ kind: 'failed', message: `nvidia-smi could not be run: ${(err as Error).message}` });
    }
  });
}

/** Result of {@link queryGpus}. */
export interface GpuInventory {
  gpus: GpuReport[];
  /** True when `nvidia-smi topo -m` shows NVLink between at least two GPUs. */
  nvlink: boolean;
  nodeError?: string;
  warnings: string[];
}

/**
 * Fields that worked per nvidia-smi path. An old driver rejects the health fields on
 * every call, so after one fallback we ask for the minimal list straight away instead
 * of paying for two NVML initialisations per poll.
 */
const fieldsByBinary = new Map<string, readonly string[]>();

function timeoutMessage(command: string, timeoutMs: number): string {
  return `${command} did not answer within ${Number((timeoutMs / 1000).toFixed(3))}s`;
}

/**
 * Lists this node's GPUs with their health, plus whether they are NVLinked. A missing
 * nvidia-smi is a CPU node (no GPUs, no error); a hang is a node error. The health
 * fields are dropped, once, if the driver says one of them is not a valid field.
 * `topo -m` is asked only when there are two or more GPUs, and its failure only
 * costs the NVLink flag.
 */
export async function queryGpus(nvidiaSmiPath: string, timeoutMs: number): Promise<GpuInventory> {
  let fields = fieldsByBinary.get(nvidiaSmiPath) ?? GPU_QUERY_FIELDS;
  let outcome = await runCommand(nvidiaSmiPath, gpuQueryArgs(fields), timeoutMs);
  const warnings: string[] = [];
  if (
    outcome.kind === 'exited' &&
    fields !== GPU_QUERY_FIELDS_MINIMAL &&
    isInvalidFieldError(`${outcome.stdout}\n${outcome.stderr}`)
  ) {
    fields = GPU_QUERY_FIELDS_MINIMAL;
    outcome = await runCommand(nvidiaSmiPath, gpuQueryArgs(fields), timeoutMs);
    if (outcome.kind === 'exited' && !isInvalidFieldError(`${outcome.stdout}\n${outcome.stderr}`)) {
      fieldsByBinary.set(nvidiaSmiPath, fields);
    }
  }
  if (fields === GPU_QUERY_FIELDS_MINIMAL) {
    warnings.push('this driver does not support the GPU health query fields; ECC and row-remap problems are not checked');
  }

  switch (outcome.kind) {
    case 'missing':
      return { gpus: [], nvlink: false, warnings: [] };
    case 'timeout':
      return { gpus: [], nvlink: false, nodeError: timeoutMessage('nvidia-smi', timeoutMs), warnings };
    case 'failed':
      return { gpus: [], nvlink: false, nodeError: outcome.message, warnings };
    case 'exited':
      break;
  }

  const parsed = parseGpuQuery(outcome.stdout, outcome.stderr, outcome.exitCode, fields);
  warnings.push(...parsed.warnings);
  let nvlink = false;
  if (parsed.gpus.length >= 2) {
    const topo = await runCommand(nvidiaSmiPath, ['topo', '-m'], timeoutMs);
    if (topo.kind === 'exited') {
      // A matrix printed alongside a failure (a lost GPU, say) still shows the links.
      nvlink = parseTopoNvlink(topo.stdout);
      if (topo.exitCode !== 0) {
        warnings.push(`nvidia-smi topo -m failed (${describeExit(topo.exitCode)}); NVLink ${nvlink ? 'taken from its partial output' : 'not reported'}`);
      }
    } else if (topo.kind === 'timeout') {
      warnings.push(`${timeoutMessage('nvidia-smi topo -m', timeoutMs)}; NVLink not reported`);
    } else if (topo.kind === 'failed') {
      warnings.push(`${topo.message}; NVLink not reported`);
    }
  }
  const result: GpuInventory = { gpus: parsed.gpus, nvlink, warnings };
  if (parsed.nodeError !== undefined) result.nodeError = parsed.nodeError;
  return result;
}
