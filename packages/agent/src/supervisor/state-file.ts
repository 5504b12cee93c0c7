import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { writePrivateFile, type ShardAssignment } from '@llmgw/shared';

/**
 * `shards.json`: what survives an agent restart. Engines outlive the agent (an upgrade
 * must not take models down); the next agent re-adopts them from this file, matched by
 * pid AND /proc start time so that a reused pid is never mistaken for an engine.
 */

/** One entry of `shards.json`. Field names are snake_case: operators read this file. */
export interface ShardRecord {
  id: string;
  replica_id: string;
  fingerprint: string;
  pid: number;
  pgid: number;
  start_time: number;
  port?: number;
  restarts: number;
  http: boolean;
  /** Being stopped when the agent exited: the next agent finishes the job. */
  retiring?: boolean;
  assignment: ShardAssignment;
}

interface StateFile {
  version: 1;
  shards: ShardRecord[];
}

/** What becomes of a recorded engine when a new agent starts. */
export type Adoption =
  /** Its process is gone, or its pid now names another process: forget the record. */
  | 'forget'
  /** It was being stopped (or its id is already taken by an earlier record): stop it. */
  | 'finish-stop'
  /** Take it over as the running engine of its shard. */
  | 'adopt';

/**
 * The adoption rule. `sameProcess`: the recorded pid is alive with the recorded start
 * time. `idTaken`: an earlier record of the same shard id was adopted already.
 */
export function adoptionOf(rec: Pick<ShardRecord, 'retiring'>, sameProcess: boolean, idTaken: boolean): Adoption {
  if (!sameProcess) return 'forget';
  if (rec.retiring || idTaken) return 'finish-stop';
  return 'adopt';
}

/** The parts of a live shard that a record keeps. */
export interface RecordedShard {
  a: ShardAssignment;
  fingerprint: string;
  proc: { pid: number; pgid: number; startTime: number };
  port?: number;
  restarts: number;
  http: boolean;
}

/** The record saved for a shard with a process; `retiring` when it is being stopped. */
export function toRecord(s: RecordedShard, retiring: boolean): ShardRecord {
  return {
    id: s.a.id,
    replica_id: s.a.replica_id,
    fingerprint: s.fingerprint,
    pid: s.proc.pid,
    pgid: s.proc.pgid,
    start_time: s.proc.startTime,
    ...(s.port !== undefined ? { port: s.port } : {}),
    restarts: s.restarts,
    http: s.http,
    ...(retiring ? { retiring: true } : {}),
    assignment: s.a,
  };
}

/** The inverse of {@link toRecord}, tolerating records written before `http` and `restarts` existed. */
export function fromRecord(rec: ShardRecord): RecordedShard {
  return {
    a: rec.assignment,
    fingerprint: rec.fingerprint,
    port: rec.port,
    http: typeof rec.http === 'boolean' ? rec.http : rec.assignment.rank === 0,
    restarts: Number.isInteger(rec.restarts) ? rec.restarts : 0,
    proc: { pid: rec.pid, pgid: rec.pgid, startTime: rec.start_time },
  };
}

/** Whether a parsed entry is a usable record; a hand-edited or truncated one is skipped. */
export function isRecord(v: unknown): v is ShardRecord {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as Record<string, unknown>;
  const a = r.assignment as Record<string, unknown> | undefined;
  return (
    typeof r.id === 'string' &&
    Number.isInteger(r.pid) &&
    (r.pid as number) > 0 &&
    // An engine leads its own group (pgid = its pid, never init's 1): a record of pgid 1
    // would have a stop signal kill(-1), every process the agent's user may signal.
    Number.isInteger(r.pgid) &&
    (r.pgid as number) > 1 &&
    typeof r.start_time === 'number' &&
    typeof r.fingerprint === 'string' &&
    typeof a === 'object' &&
    a !== null &&
    a.id === r.id &&
    Array.isArray(a.gpus)
  );
}

/** Reads and writes one `shards.json`; the supervisor saves after every change. */
export class StateFileStore {
  private lastSaved = '';

  constructor(
    private readonly stateDir: string,
    private readonly log: Logger,
  ) {}

  private get file(): string {
    return path.join(this.stateDir, 'shards.json');
  }

  /** Writes the records when they would change the file; tmp + rename so a crash never leaves half a file. */
  save(records: ShardRecord[]): void {
    const text = JSON.stringify({ version: 1, shards: records } satisfies StateFile, null, 2) + '\n';
    if (text === this.lastSaved) return;
    try {
      fs.mkdirSync(this.stateDir, { recursive: true });
      writePrivateFile(this.file, text); // holds API keys
      this.lastSaved = text;
    } catch (err) {
      this.log.error({ err }, 'cannot save engine state; a restarted agent would not re-adopt engines');
    }
  }

  /** The valid records; none when the file is missing or not JSON. */
  load(): ShardRecord[] {
    let text: string;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.log.warn({ err }, 'cannot read engine state');
      return [];
    }
    try {
      const parsed = JSON.parse(text) as Partial<StateFile>;
      return (Array.isArray(parsed.shards) ? parsed.shards : []).filter(isRecord);
    } catch (err) {
      this.log.warn({ err }, 'engine state file is not JSON; adopting nothing');
      return [];
    }
  }
}
