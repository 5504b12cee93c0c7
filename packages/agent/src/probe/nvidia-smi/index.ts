/**
 * GPUs from `nvidia-smi`, in the order a probe runs the steps:
 * fields (what to ask) → run (one bounded invocation) → parse (rows, lost GPUs, node
 * errors; per row: values, gpu-class) → topology (NVLink) → inventory (the whole query,
 * with the field fallback).
 */
export { GPU_QUERY_FIELDS, GPU_QUERY_FIELDS_MINIMAL, gpuQueryArgs, isInvalidFieldError } from './fields.js';
export { NVIDIA_SMI_EXIT_CODES, describeExit, runCommand, type RunOutcome } from './run.js';
export { isUnknownValue, normaliseBusId } from './values.js';
export { gpuClass } from './gpu-class.js';
export { parseGpuRow, rowProblems } from './row.js';
export { LOST_GPU_PROBLEM, nodeFailureMessage, parseGpuQuery, parseLostGpuLine, type GpuQueryResult } from './parse.js';
export { parseTopoNvlink } from './topology.js';
export { queryGpus, type GpuInventory } from './inventory.js';
