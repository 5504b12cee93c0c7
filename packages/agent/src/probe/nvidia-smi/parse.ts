import type { GpuReport } from '@llmgw/shared';
import { GPU_QUERY_FIELDS } from './fields.js';
import { parseGpuRow } from './row.js';
import { describeExit } from './run.js';
import { normaliseBusId } from './values.js';

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
  const busId = LOST_BUS_ID.exec(line)?.[1];
  return busId === undefined ? {} : { busId: normaliseBusId(busId) };
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
  const line = text
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '');
  return line === undefined ? undefined : line.slice(0, 300);
}

/** The node-level error for output that listed no GPU at all. */
export function nodeFailureMessage(output: string, exitCode: number): string {
  const known = NODE_FAILURES.find((f) => f.match.test(output));
  if (known) return `${known.message} (${describeExit(exitCode)})`;
  const nvml = /Failed to initialize NVML:\s*(.*)/i.exec(output);
  if (nvml) return `NVML failed to initialise: ${(nvml[1] ?? '').trim()} (${describeExit(exitCode)})`;
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
export function parseGpuQuery(stdout: string, stderr: string, exitCode: number, fields: readonly string[] = GPU_QUERY_FIELDS): GpuQueryResult {
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
