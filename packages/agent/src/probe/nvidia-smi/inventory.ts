import type { GpuReport } from '@llmgw/shared';
import { GPU_QUERY_FIELDS, GPU_QUERY_FIELDS_MINIMAL, gpuQueryArgs, isInvalidFieldError } from './fields.js';
import { parseGpuQuery } from './parse.js';
import { describeExit, runCommand } from './run.js';
import { parseTopoNvlink } from './topology.js';

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
  if (outcome.kind === 'exited' && fields !== GPU_QUERY_FIELDS_MINIMAL && isInvalidFieldError(`${outcome.stdout}\n${outcome.stderr}`)) {
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
