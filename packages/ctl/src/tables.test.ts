import { describe, expect, it } from '@jest/globals';
import type { ExplainView, ModelView, NodeView, ReplicaView } from '@llmgw/shared';
import { Chalk } from 'chalk';
import { colours } from './render.js';
import { adaptersTable, explainText, keysTable, modelsTable, nodeDetails, nodesTable, parseExpiry, replicasTable, usageTable } from './tables.js';

const plain = new Chalk({ level: 0 });

const node = (o: Partial<NodeView> = {}): NodeView => ({
  id: 'cpu-small',
  state: 'ready',
  liveness: 'ready',
  labels: {},
  gpu_total: 0,
  gpu_free: 0,
  memory_gb: 8,
  gpu_classes: [],
  fabrics: [],
  unhealthy_gpus: [],
  last_seen_s: 1,
  agent_version: '0.1.0',
  replicas: 0,
  ...o,
});

describe('nodesTable', () => {
  it('shows - (not 0) for a node that did not report memory, and free/total GPUs', () => {
    const { memory_gb: _, ...noMem } = node({ id: 'old-agent' });
    const out = nodesTable([node(), noMem, node({ id: 'gpu', gpu_total: 8, gpu_free: 7, gpu_classes: ['H100-80GB'], memory_gb: 2015.5 })], plain);
    const lines = out.split('\n');
    expect(lines[0]).toBe('NAME       STATE  GPUS  CLASS      MEM(GiB)  FABRICS  REPLICAS  LAST SEEN  VERSION');
    expect(lines[1]).toBe('cpu-small  ready  0/0   -          8         -        0         1s         0.1.0');
    expect(lines[2]).toBe('old-agent  ready  0/0   -          -         -        0         1s         0.1.0');
    expect(lines[3]).toMatch(/^gpu\s+ready\s+7\/8\s+H100-80GB\s+2015\.5 /);
  });

  it('puts bad liveness first and keeps the admin state, like kubectl', () => {
    const out = nodesTable([node({ state: 'cordoned', liveness: 'not-ready' }), node({ id: 'b', liveness: 'lost' })], plain);
    expect(out).toMatch(/cpu-small\s+not-ready,cordoned/);
    expect(out).toMatch(/b\s+lost\s/);
  });

  it('marks a node whose credential was heard from two places suspect, and says why under the table (issue 27, finding 8)', () => {
    const n = node({ id: 'gpu-1', suspect: 'node credential of gpu-1 heard from 10.0.0.5 and 10.0.0.66 at once' });
    expect(nodesTable([n], plain)).toMatch(/gpu-1\s+ready,suspect\s/);
    expect(nodeDetails([n])).toBe('gpu-1: suspect: node credential of gpu-1 heard from 10.0.0.5 and 10.0.0.66 at once');
  });

  it('shows - for the GPUs of a node waiting for approval: it keeps only its identity (issue 27)', () => {
    expect(nodesTable([node({ id: 'big', state: 'pending-approval' })], plain)).toMatch(/big\s+pending-approval\s+-\s/);
  });

  it('says how to join a machine when there is none', () => {
    expect(nodesTable([], plain)).toMatch(/Start llmgw-agent/);
  });

  it('lists unhealthy GPUs, drain progress and reasons under the table', () => {
    const details = nodeDetails([
      node({ id: 'gpu', unhealthy_gpus: ['gpu 3: fell off the bus'], state: 'draining', state_reason: 'PSU', drain_status: '1 replica left: r-1 waiting' }),
    ]);
    expect(details.split('\n')).toEqual(['gpu: gpu 3: fell off the bus', 'gpu: draining (PSU)', 'gpu: 1 replica left: r-1 waiting']);
  });
});

describe('explainText on a placed model', () => {
  it('promises lines from the last attempt only when there are some', () => {
    const v: ExplainView = { model: 'm', placed: true, attempted: true, summary: 'm is placed on cpu-a', notes: [], rejections: [] };
    expect(explainText(v, plain)).toBe('m is placed on cpu-a\nm has replicas (see ctl replicas --model m).');
    const withRejection = explainText({ ...v, rejections: [{ profile: 'cpu', node: 'b', code: 'cordoned', reason: 'is cordoned' }] }, plain);
    expect(withRejection.split('\n').slice(1, 2)).toEqual([
      'm has replicas (see ctl replicas --model m); the lines below are from the last placement attempt.',
    ]);
  });
});

describe('explainText', () => {
  it('prints the summary, then rejections grouped by profile and pool, one line per node', () => {
    const v: ExplainView = {
      model: 'm',
      placed: false,
      attempted: true,
      summary: '0/3 nodes can run m: 2 too little memory, 1 cordoned',
      notes: [{ profile: 'cpu', node: 'old', note: 'memory unknown' }],
      rejections: [
        { profile: 'cpu', node: 'a', code: 'memory', reason: 'has 8 GiB of memory, needs 24' },
        { profile: 'cpu', node: 'a', code: 'label', reason: 'lacks label role=coding' },
        { profile: 'cpu', node: 'old', code: 'cordoned', reason: 'is cordoned' },
        { profile: 'multi', pool: 'rack-a', node: 'b', code: 'fabric', reason: 'lacks fabric infiniband' },
        { profile: 'multi', pool: 'rack-a', code: 'shards', reason: 'pool rack-a: fits 1 of 2 shards' },
      ],
    };
    expect(explainText(v, plain)).toBe(
      [
        '0/3 nodes can run m: 2 too little memory, 1 cordoned',
        '',
        'profile cpu:',
        '  a: has 8 GiB of memory, needs 24; lacks label role=coding',
        '  old: is cordoned',
        '  old: memory unknown',
        '',
        'profile multi:',
        '  pool rack-a:',
        '    b: lacks fabric infiniband',
        '    pool rack-a: fits 1 of 2 shards',
      ].join('\n'),
    );
  });

  it('says plainly when placement has not been attempted', () => {
    expect(explainText({ model: 'm', placed: false, attempted: false, notes: [], rejections: [] }, plain)).toMatch(/has not been attempted yet/);
  });
});

describe('keys and expiry', () => {
  const now = new Date('2026-11-29T00:00:00Z');
  it('parses durations and ISO times, and refuses anything else with a usage error', () => {
    expect(parseExpiry('30d', now)).toBe('2026-12-29T00:00:00.000Z');
    expect(parseExpiry('90m', now)).toBe('2026-11-29T01:30:00.000Z');
    expect(parseExpiry('2027-01-31T00:00:00Z', now)).toBe('2027-01-31T00:00:00.000Z');
    expect(() => parseExpiry('soon', now)).toThrow(/invalid --expires "soon"/);
  });

  it('shows keys without secrets, with their limits, band and status', () => {
    const out = keysTable(
      [
        { id: 'key-1', name: 'app', prefix: 'sk-llmgw-abcd', models: [], created_at: 'x', expires_at: '2026-01-01T00:00:00.000Z' },
        { id: 'key-2', name: 'jobs', prefix: 'sk-llmgw-ef01', models: ['m'], rpm: 60, tpm: 30000, max_concurrent: 4, priority: 'batch', created_at: 'x' },
      ],
      now,
    );
    const [head, one, two] = out.split('\n').map((l) => l.trim().split(/\s{2,}/));
    expect(head).toEqual(['ID', 'NAME', 'PREFIX', 'MODELS', 'RPM', 'TPM', 'CONCURRENT', 'PRIORITY', 'EXPIRES', 'STATUS']);
    expect(one).toEqual(['key-1', 'app', 'sk-llmgw-abcd…', 'all', '-', '-', '-', 'standard', '2026-01-01T00:00:00.000Z', 'expired']);
    expect(two).toEqual(['key-2', 'jobs', 'sk-llmgw-ef01…', 'm', '60', '30000', '4', 'batch', 'never', 'active']);
  });
});

describe('colours', () => {
  it('never colours with NO_COLOR or off a terminal', () => {
    const tty = { isTTY: true } as NodeJS.WriteStream;
    const saved = process.env.NO_COLOR;
    const savedTerm = process.env.TERM;
    process.env.TERM = 'xterm-256color';
    process.env.NO_COLOR = '1';
    expect(colours(tty).level).toBe(0);
    delete process.env.NO_COLOR;
    expect(colours(tty).level).toBeGreaterThan(0);
    expect(colours({ isTTY: false } as NodeJS.WriteStream).level).toBe(0);
    if (saved !== undefined) process.env.NO_COLOR = saved;
    if (savedTerm !== undefined) process.env.TERM = savedTerm;
    else delete process.env.TERM;
  });
});

describe('usageTable', () => {
  it('shows the requests the client left mid-stream after the errors', () => {
    const out = usageTable([{ key_id: 'key-1', key_name: 'app', model: 'm', requests: 3, errors: 1, cancelled: 2, prompt_tokens: 10, completion_tokens: 7 }]);
    const [head, row] = out.split('\n').map((l) => l.trim().split(/\s{2,}/));
    expect(head).toEqual(['KEY', 'MODEL', 'REQUESTS', 'ERRORS', 'CANCELLED', 'PROMPT TOKENS', 'COMPLETION TOKENS']);
    expect(row).toEqual(['app (key-1)', 'm', '3', '1', '2', '10', '7']);
  });

  it('says which window was empty', () => {
    expect(usageTable([])).toBe('No requests yet.');
    expect(usageTable([], '1h')).toBe('No requests in the last 1h.');
    expect(usageTable([], '2026-12-01T00:00:00Z')).toBe('No requests since 2026-12-01T00:00:00Z.');
  });
});

describe('modelsTable', () => {
  const model = (o: Partial<ModelView> = {}): ModelView => ({
    name: 'qwen',
    aliases: [],
    source: 's',
    min_replicas: 1,
    max_replicas: 2,
    ready_replicas: 1,
    total_replicas: 1,
    fallbacks: [],
    profiles: ['cpu'],
    routing: 'cache-aware',
    ...o,
  });

  it("shows each model's routing policy", () => {
    const lines = modelsTable([model(), model({ name: 'embed', routing: 'least-loaded' })], plain).split('\n');
    expect(lines[0]).toMatch(/ROUTING/);
    expect(lines.find((l) => l.includes('qwen'))).toMatch(/cache-aware/);
    expect(lines.find((l) => l.includes('embed'))).toMatch(/least-loaded/);
  });

  it("counts each model's LoRA adapters, and lists them with where each is loaded", () => {
    const adapters = [
      { name: 'sql-lora', source: '/m/sql.gguf', loaded_on: ['r-1', 'r-2'] },
      { name: 'chat-lora', source: 'https://files.invalid', loaded_on: [] },
    ];
    const lines = modelsTable([model({ adapters }), model({ name: 'embed' })], plain).split('\n');
    const col = lines[0]!.indexOf('ADAPTERS');
    expect(col).toBeGreaterThan(lines[0]!.indexOf('ROUTING'));
    expect(
      lines
        .find((l) => l.startsWith('qwen'))!
        .slice(col)
        .split(/\s+/)[0],
    ).toBe('2');
    expect(
      lines
        .find((l) => l.startsWith('embed'))!
        .slice(col)
        .split(/\s+/)[0],
    ).toBe('-');
    expect(adaptersTable([model({ adapters }), model({ name: 'embed' })]).split('\n')).toEqual([
      'MODEL  ADAPTER    SOURCE                 LOADED ON',
      'qwen   sql-lora   /m/sql.gguf            r-1,r-2',
      'qwen   chat-lora  https://files.invalid  -',
    ]);
    expect(adaptersTable([model()])).toBe('');
  });
});

describe('replicasTable', () => {
  const replica = (o: Partial<ReplicaView> = {}): ReplicaView => ({
    id: 'r-1',
    model: 'qwen',
    profile: 'cpu',
    state: 'ready',
    age_seconds: 5,
    shards: [],
    ...o,
  });

  it('shows the LoRA adapters each replica holds loaded only with -o wide', () => {
    const rs = [replica({ adapters: ['chat-lora', 'sql-lora'] }), replica({ id: 'r-2', adapters: [] }), replica({ id: 'r-3' })];
    expect(replicasTable(rs, plain)).not.toContain('ADAPTERS');
    const lines = replicasTable(rs, plain, true).split('\n');
    const col = lines[0]!.indexOf('ADAPTERS');
    expect(col).toBeGreaterThan(0);
    expect(lines.map((l) => l.slice(col).split(/\s+/)[0])).toEqual(['ADAPTERS', 'chat-lora,sql-lora', '-', '-']);
  });
});

describe('explainText for a LoRA adapter', () => {
  const base: ExplainView = { model: 'm', placed: false, attempted: true, summary: '0/1 nodes can run m: 1 cordoned', notes: [], rejections: [] };

  it('says why it cannot be served, then its base placement', () => {
    const text = explainText(
      { ...base, adapter: { name: 'sql-lora', problems: ['no replica of its base m is ready', 'its file failed its checksum on replica r-1: x'] } },
      plain,
    );
    expect(text.split('\n')).toEqual([
      'adapter sql-lora of m cannot be served:',
      '  no replica of its base m is ready',
      '  its file failed its checksum on replica r-1: x',
      '',
      'm:',
      '0/1 nodes can run m: 1 cordoned',
    ]);
  });

  it('says when it can be served', () => {
    expect(explainText({ ...base, placed: true, adapter: { name: 'sql-lora', problems: [] } }, plain)).toMatch(/^adapter sql-lora of m can be served/);
  });
});
