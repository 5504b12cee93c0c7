import { describe, expect, it } from '@jest/globals';
import { hubProgress, parseByteBar } from './hub-progress.js';
import { LAUNCH_MARK } from './logs.js';

// Lines as vLLM/SGLang logs show them while huggingface_hub fetches a hub id: tqdm
// redraws a bar in place with \r, and ends it with \n once it is closed.
const SHARD1 = 'model-00001-of-00004.safetensors';
const bar = (label: string, pct: number, n: string, t: string, rate: string, time = '00:30<00:36') =>
  `${label}: ${String(pct).padStart(3)}%|${'█'.repeat(Math.floor(pct / 10)).padEnd(10)}| ${n}/${t} [${time}, ${rate}]`;

const START = [
  'INFO 12-01 15:43:24 [api_server.py:1896] vLLM API server version 0.11.0',
  'INFO 12-01 15:43:31 [model.py:547] Resolved architecture: Qwen2ForCausalLM',
  `config.json: 100%|██████████| 663/663 [00:00<00:00, 4.12MB/s]`,
  `Fetching 12 files:   0%|          | 0/12 [00:00<?, ?it/s]`,
].join('\n');

describe('parseByteBar', () => {
  it('reads a byte bar: decimal units, the B optional, the rate in B/s', () => {
    expect(parseByteBar(bar(SHARD1, 45, '2.24G', '4.97G', '75.2MB/s'))).toEqual({ label: SHARD1, done: 2.24e9, total: 4.97e9, rate: 75.2e6 });
    expect(parseByteBar(bar('x.bin', 12, '120MB', '1.00GB', '1.2GB/s'))).toEqual({ label: 'x.bin', done: 120e6, total: 1e9, rate: 1.2e9 });
    expect(parseByteBar(bar('tok.json', 50, '3.50k', '7.00k', '900kB/s'))?.total).toBe(7000);
    expect(parseByteBar(bar('cfg', 40, '400', '1000', '2.00kB/s'))).toEqual({ label: 'cfg', done: 400, total: 1000, rate: 2000 });
  });

  it('reads the rate tqdm does not know yet as 0, and the inverse form as bytes per second', () => {
    expect(parseByteBar(bar('a', 0, '0.00', '4.97G', '?B/s', '00:00<?'))?.rate).toBe(0);
    expect(parseByteBar(bar('a', 1, '10.5M', '4.97G', '2.00s/B'))?.rate).toBe(0.5);
  });

  it('ignores count bars, bars without a total and other lines', () => {
    expect(parseByteBar('Downloading shards:  50%|█████     | 2/4 [01:02<01:02, 31.2s/it]')).toBeUndefined();
    expect(parseByteBar('Fetching 12 files:  33%|███▎      | 4/12 [00:10<00:20, 2.50it/s]')).toBeUndefined();
    expect(parseByteBar('Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:01<00:03,  1.10s/it]')).toBeUndefined();
    expect(parseByteBar('model.safetensors: 2.24GB [00:30, 75.2MB/s]')).toBeUndefined();
    expect(parseByteBar('INFO 12-01 15:43:31 [loader.py:12] Loading weights took 3.10 seconds')).toBeUndefined();
    expect(parseByteBar('45%|garbage| 2.24G/ [00:30')).toBeUndefined();
    expect(parseByteBar('')).toBeUndefined();
  });

  it('reads a bar drawn after the cursor moves of several bars at once under its own label', () => {
    // The label matters: it is what tells a redraw of one bar from another bar.
    expect(parseByteBar(`\x1b[A\x1b[A${bar(SHARD1, 45, '2.24G', '4.97G', '75.2MB/s')}`)).toMatchObject({ label: SHARD1, done: 2.24e9 });
  });
});

describe('hubProgress', () => {
  it('takes the latest \\r redraw of a bar not yet at its total', () => {
    const redraws = [
      bar(SHARD1, 0, '0.00', '4.97G', '?B/s', '00:00<?'),
      bar(SHARD1, 20, '1.00G', '4.97G', '70.1MB/s'),
      bar(SHARD1, 45, '2.24G', '4.97G', '75.2MB/s'),
    ].join('\r');
    expect(hubProgress(`${START}\n${redraws}`)).toEqual({ done_bytes: 2.24e9, total_bytes: 4.97e9, bytes_per_s: 75.2e6 });
  });

  it('shows nothing once every bar is finished, nor for the count bars that follow', () => {
    const done = [bar(SHARD1, 99, '4.96G', '4.97G', '80.0MB/s'), `${bar(SHARD1, 100, '4.97G', '4.97G', '80.1MB/s', '01:02<00:00')}\n`].join('\r');
    const loading = 'Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:02<00:02,  1.05s/it]\r';
    expect(hubProgress(`${START}\n${done}${loading}`)).toBeUndefined();
    expect(hubProgress(`${START}\n`)).toBeUndefined();
  });

  it('sums the files in flight; finished ones drop out', () => {
    const log = [
      bar('model-00001-of-00002.safetensors', 100, '4.97G', '4.97G', '80.0MB/s'),
      bar('model-00002-of-00002.safetensors', 10, '300M', '3.00G', '40.0MB/s'),
      bar('tokenizer.json', 50, '3.50M', '7.00M', '5.00MB/s'),
    ].join('\n');
    expect(hubProgress(log)).toEqual({ done_bytes: 303.5e6, total_bytes: 3.007e9, bytes_per_s: 45e6 });
  });

  it('counts only the current run: bars before the last launch mark are an earlier engine', () => {
    const old = bar(SHARD1, 45, '2.24G', '4.97G', '75.2MB/s');
    expect(hubProgress(`${old}\n${LAUNCH_MARK}t launch #1 of shard s: vllm serve Qwen/Qwen2.5-7B\n${START}\n`)).toBeUndefined();
    expect(hubProgress(`${LAUNCH_MARK}t launch #0\n${old}`)?.done_bytes).toBe(2.24e9);
  });

  it('ignores garbage and count bars when no byte bar exists', () => {
    const garbage = '\x00\x01 %|| /\r\r\n]]][ 45%| x/y [a<b, cB/s]\nTraceback (most recent call last):\n';
    expect(hubProgress(garbage)).toBeUndefined();
    expect(hubProgress('Downloading shards:  50%|█████     | 2/4 [01:02<01:02, 31.2s/it]\r')).toBeUndefined();
  });
});
