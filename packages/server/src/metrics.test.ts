import { describe, expect, it } from '@jest/globals';
import { Metrics } from './metrics.js';

describe('Metrics', () => {
  it('names every metric once with llmgw_, the process ones without a doubled prefix', async () => {
    const text = await new Metrics().registry.metrics();
    const names = [...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]!);
    expect(names).toEqual(expect.arrayContaining(['llmgw_process_cpu_user_seconds_total', 'llmgw_nodejs_heap_size_used_bytes', 'llmgw_requests_total']));
    expect(names.filter((n) => !n.startsWith('llmgw_') || /^llmgw_(\w+?)_\1_/.test(n))).toEqual([]);
  });
});
