import type { GpuReport } from '@llmgw/shared';
import { gpuClass } from './gpu-class.js';
import { knownCount, knownString, normaliseBusId } from './values.js';

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
    row[f] = (cells[i] ?? '').trim();
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
