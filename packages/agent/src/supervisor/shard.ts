import fs from 'node:fs';
import path from 'node:path';
import type { DownloadProgress, ShardAssignment, ShardStatus } from '@llmgw/shared';
import { unreadableBy, type EngineUser } from '../engine-user.js';
import { UnusableSource, type Fetched, type FileSource } from '../files/store.js';
import { fingerprint } from './converge.js';
import { hubProgress } from './hub-progress.js';
import type { RunningProcess } from './spawn.js';
import { fromRecord, type ShardRecord } from './state-file.js';
import { initialLife, type Life } from './state-machine.js';

/** One assigned (or stopping) shard: its life, plus the process, port and timer that carry it out. */
export interface Shard {
  a: ShardAssignment;
  fingerprint: string;
  life: Life;
  port?: number;
  http: boolean;
  proc?: RunningProcess;
  /** Bumped on every transition so that late callbacks of an earlier run do nothing. */
  epoch: number;
  timer?: NodeJS.Timeout;
  /** Launch postponed until a stopping engine with its id or GPUs is gone. */
  waiting: boolean;
  /** Aborted when the shard is retired: its model file's transfer need not go on for it. */
  unwanted?: AbortController;
  /** This shard's model file was fetched for it (`ShardStatus.fetched`), not found in the cache. */
  fetched?: Fetched;
  /** The shard's error is a model or adapter file's (`ShardStatus.download_failed`); cleared once a launch has its files. */
  downloadFailed?: boolean;
}

/** A shard that was never launched. */
export function newShard(a: ShardAssignment): Shard {
  return { a, fingerprint: fingerprint(a), life: initialLife(), http: a.rank === 0, epoch: 0, waiting: false };
}

/** A shard re-adopted from `shards.json`. */
export function shardFromRecord(rec: ShardRecord): Shard {
  const r = fromRecord(rec);
  return { ...newShard(r.a), fingerprint: r.fingerprint, port: r.port, http: r.http, proc: r.proc, life: initialLife(r.restarts) };
}

/**
 * The assignment as the engine sees it: for a `file`, the cached file's path where
 * `source` goes, fetched and verified first when the cache lacks it.
 */
export async function withModelFile(s: Shard, files: FileSource | undefined, engineUser?: EngineUser): Promise<ShardAssignment> {
  let a = s.a;
  if (a.file) {
    if (!files) throw new UnusableSource(`this agent has no model cache to fetch ${a.file.url} into`);
    const file = a.file;
    s.unwanted ??= new AbortController();
    const signal = s.unwanted.signal;
    a = { ...a, source: await fetching(s, () => files.ensure(file, signal, (f) => (s.fetched = f))) };
  }
  // LoRA adapters given as URLs come through the same cache, verified the same way.
  if (a.adapters?.some((x) => x.file)) {
    if (!files) throw new UnusableSource(`this agent has no model cache to fetch the adapters of ${a.model} into`);
    s.unwanted ??= new AbortController();
    const signal = s.unwanted.signal;
    const adapters = [];
    for (const x of a.adapters) {
      const file = x.file;
      adapters.push(file ? { ...x, source: await fetching(s, () => files.ensure(file, signal)) } : x);
    }
    a = { ...a, adapters };
  }
  // The files are here: what fails from now on is not theirs. (Kept until now, so that a
  // retry's status still says the error it shows is a file's.)
  s.downloadFailed = false;
  // A local file or folder the engine, run as another user, could not open: say so now,
  // once, rather than let the engine fail on it after every restart.
  if (engineUser && path.isAbsolute(a.source) && fs.existsSync(a.source)) {
    const denied = await unreadableBy(a.source, engineUser);
    if (denied) throw new UnusableSource(denied);
  }
  return a;
}

/** A fetch that failed marks the shard's failure as its file's, not its engine's. */
async function fetching(s: Shard, get: () => Promise<string>): Promise<string> {
  try {
    return await get();
  } catch (err) {
    s.downloadFailed = true;
    throw err;
  }
}

/** Engines that fetch a hub id themselves, through huggingface_hub, whose bars `hubProgress` reads. */
const HUB_ENGINES: ReadonlySet<string> = new Set(['vllm', 'sglang']);

/**
 * A shard's download progress while its model comes: llmgw's own fetch of its `file` (no
 * engine yet), or else, for vLLM and SGLang fetching a hub id themselves, what the
 * engine's log shows (`readLog` gives its end; read only then) while the engine starts.
 */
export function downloadOf(s: Shard, files: FileSource | undefined, readLog: () => string): Pick<ShardStatus, 'download' | 'fetched' | 'download_failed'> {
  let progress: DownloadProgress | undefined;
  if (s.a.file) progress = s.proc ? undefined : files?.progress(s.a.file.sha256);
  else if (HUB_ENGINES.has(s.a.engine) && s.proc && s.life.state === 'starting') progress = hubProgress(readLog());
  return {
    ...(progress ? { download: progress } : {}),
    ...(s.fetched ? { fetched: s.fetched } : {}),
    ...(s.downloadFailed && s.life.error ? { download_failed: true } : {}),
  };
}
