import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { checksumMismatchText, type ShardStatus } from '@llmgw/shared';
import { Controller, type CatalogView } from '../controller/controller.js';
import { Downloads, type DownloadChange } from '../controller/downloads.js';
import type { Decision, Replica } from '../domain.js';
import { Inventory } from '../inventory.js';
import { downloadEvent } from './downloads.js';
import { makeModel, makeReplica, makeReport } from '../../test/factories.js';
import { memoryStore } from '../store/testing.js';

const URL_ = 'https://files.example/m.gguf';
const SHA = 'a'.repeat(64);
const starting = (): Replica =>
  makeReplica({
    state: 'starting',
    spec: { engine: 'node-llama-cpp', source: URL_, args: [], env: {}, file: { url: URL_, sha256: SHA } },
    shards: [{ id: 'r-1-0', nodeId: 'node-1', rank: 0, gpuUuids: [], gpuIndices: [], state: 'starting' }],
  });
const status = (o: Partial<ShardStatus>): ShardStatus => ({ id: 'r-1-0', replica_id: 'r-1', state: 'starting', ...o });
const mismatch = checksumMismatchText(URL_, SHA, 'b'.repeat(64));

/** The heartbeats' download changes, as `kind` and the event's words. */
function beats(...shards: ShardStatus[][]): Array<[DownloadChange['kind'], string]> {
  const d = new Downloads();
  const r = starting();
  return shards.flatMap((s, i) => d.report('node-1', s, () => r, i * 1000).map((c) => [c.kind, downloadEvent(c).message] as [DownloadChange['kind'], string]));
}

describe('Downloads: files that come between two heartbeats (issue 30 item 9)', () => {
  it('records a file the agent says it fetched, once, with its size and time, though no beat saw it coming', () => {
    const fetched = { bytes: 512_000, ms: 120 };
    expect(beats([status({ fetched })], [status({ fetched, state: 'ready' })], [status({ state: 'ready' })])).toEqual([
      ['finished', 'downloaded https://files.example/m.gguf to node-1 (512 KB in 120 ms, 4.3 MB/s)'],
    ]);
  });

  it('records one download-done for a file seen coming, with the agent’s figures once it came', () => {
    const download = { done_bytes: 100_000, total_bytes: 3_400_000_000, bytes_per_s: 40_000 };
    expect(beats([status({ download })], [status({ download })], [status({ fetched: { bytes: 3_400_000_000, ms: 90_000 } })])).toEqual([
      ['started', 'downloading https://files.example/m.gguf to node-1 (3.4 GB)'],
      ['finished', 'downloaded https://files.example/m.gguf to node-1 (3.4 GB in 90 s, 38 MB/s)'],
    ]);
  });

  it('records a fetch that failed as download-failed, once per failure, with or without progress seen', () => {
    const cut = 'cannot fetch https://files.example/m.gguf: socket hang up (5 tries without progress); restarting in 0.2s';
    expect(
      beats(
        [status({ error: cut, download_failed: true })],
        [status({ error: cut, download_failed: true })],
        // The retry's transfer, under the error of the try before.
        [status({ error: cut, download_failed: true, download: { done_bytes: 2_000, bytes_per_s: 900 } })],
        [status({ state: 'failed', error: mismatch, download_failed: true })],
        [status({ state: 'failed', error: mismatch, download_failed: true })],
      ),
    ).toEqual([
      ['failed', `download of https://files.example/m.gguf to node-1 failed: ${cut}`],
      ['started', 'downloading https://files.example/m.gguf to node-1'],
      ['failed', `download of https://files.example/m.gguf to node-1 failed after about 1 s (downloading 2.0 KB (900 B/s)): ${mismatch}`],
    ]);
  });

  it('tells a checksum mismatch from an agent older than download_failed by its text', () => {
    expect(beats([status({ state: 'failed', error: mismatch })])).toEqual([
      ['failed', `download of https://files.example/m.gguf to node-1 failed: ${mismatch}`],
    ]);
    expect(beats([status({ state: 'failed', error: 'exited with status 1' })])).toEqual([]);
  });
});

describe('Controller: a shard whose file failed', () => {
  function controller(): { ctl: Controller; decided: Decision[]; downloads: DownloadChange[] } {
    const r = starting();
    const store = memoryStore({ replicas: [r] });
    const model = makeModel();
    const catalog: CatalogView = { models: [model], resolve: () => model, suggest: () => [] };
    const opts = { reconcileIntervalMs: 60_000, drainParallel: 1, minHealthyMs: 0, drainTimeoutMs: 60_000, maxLostFraction: 0.5, failedBackoffMs: 30_000 };
    const ctl = new Controller(new Inventory(store, { notReadyAfterMs: 15_000, lostAfterMs: 60_000 }), store, catalog, opts, pino({ level: 'silent' }), [r]);
    const decided: Decision[] = [];
    const downloads: DownloadChange[] = [];
    ctl.events.on('decided', (ds) => decided.push(...ds));
    ctl.events.on('downloads', (ds) => downloads.push(...ds));
    return { ctl, decided, downloads };
  }
  const beat = (ctl: Controller, st: ShardStatus) => ctl.heartbeat({ report: makeReport({ node_id: 'node-1' }), shards: [st] });

  it('is download-failed, not engine-failed: from an agent that says so, and from a checksum mismatch', () => {
    for (const st of [status({ state: 'failed', error: mismatch, download_failed: true }), status({ state: 'failed', error: mismatch })]) {
      const { ctl, decided, downloads } = controller();
      beat(ctl, st);
      expect(ctl.listReplicas()[0]!.state).toBe('failed');
      expect(decided.filter((d) => d.code === 'engine-failed')).toEqual([]);
      expect(downloads.map((d) => d.kind)).toEqual(['failed']);
    }
  });

  it('is engine-failed when its engine failed', () => {
    const { ctl, decided, downloads } = controller();
    beat(ctl, status({ state: 'failed', error: 'exited with status 1 after 5 restarts', fetched: { bytes: 1, ms: 1 } }));
    expect(decided.map((d) => d.code)).toEqual(['engine-failed']);
    expect(downloads.map((d) => d.kind)).toEqual(['finished']);
  });
});
