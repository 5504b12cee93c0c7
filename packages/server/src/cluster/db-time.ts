/**
 * "DB ms": the database's wall clock in milliseconds, read when the statement runs.
 * Every time the cluster code compares (lease expiry, seen within N s) is written and
 * compared in this one clock, so the instances' own clocks may disagree freely.
 * `clock_timestamp()` rather than `now()`: `now()` is the transaction's start, which
 * for a statement that waited on a row lock can be long past.
 */
export const DB_MS = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

/** A bigint column as pg returns it (a string), as a number: DB ms fit easily in 2^53. */
export const num = (v: string | number | null | undefined): number => (v === null || v === undefined ? NaN : Number(v));

/** An error's message, whatever was thrown. */
export const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));
