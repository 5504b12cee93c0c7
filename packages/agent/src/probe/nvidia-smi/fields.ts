/** The `--query-gpu` field lists and the arguments that ask for them. */

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

/** True when the output says a query field is unknown to this driver. */
export function isInvalidFieldError(output: string): boolean {
  return /is not a valid field to query/i.test(output);
}
