import { describe, expect, it } from '@jest/globals';
import { CatalogSchema, HeartbeatSchema, NodeStateRequestSchema, fieldPath, formatFailure, validate, validateAll } from './index.js';
import type { Heartbeat } from './index.js';

const beat = (): Heartbeat => ({
  report: {
    node_id: 'node-a',
    hostname: 'node-a',
    mgmt_addr: '10.0.0.1',
    agent_version: '0.1.0',
    labels: { role: 'coding' },
    memory_total_mb: 8192,
    gpus: [{ index: 0, uuid: 'GPU-1', name: 'NVIDIA H100 80GB HBM3', class: 'H100-80GB', memory_total_mb: 81559, problems: [] }],
    fabrics: ['nvlink'],
  },
  shards: [],
});

/** Malformed input on purpose: lets a test write a value of the wrong type into a typed message. */
const loose = (value: unknown): Record<string, unknown> => value as Record<string, unknown>;

describe('validate', () => {
  it('accepts a well-formed heartbeat', () => {
    expect(validate(HeartbeatSchema, beat())).toEqual({ ok: true, value: beat() });
  });

  it.each([
    ['report.memory_total_mb', (b: Heartbeat) => (loose(b.report).memory_total_mb = '8192'), 'must be integer'],
    ['report.gpus[0].index', (b: Heartbeat) => (loose(b.report.gpus[0]).index = 'zero'), 'must be integer'],
    ['report.labels.role', (b: Heartbeat) => (loose(b.report.labels).role = 7), 'must be string'],
    ['report.hostname', (b: Heartbeat) => delete loose(b.report).hostname, 'is required'],
    ['report.fabrics', (b: Heartbeat) => (loose(b.report).fabrics = 'nvlink'), 'must be array'],
    ['report.gpus[0].problems', (b: Heartbeat) => (loose(b.report.gpus[0]).problems = null), 'must be array'],
  ])('names %s when it has the wrong type', (field, mutate, message) => {
    const b = beat();
    mutate(b);
    const r = validate(HeartbeatSchema, b);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toEqual({ field, message });
  });

  it('names the allowed values of a union', () => {
    const b = beat();
    loose(b).shards = [{ id: 's', replica_id: 'r', state: 'bogus' }];
    const r = validate(HeartbeatSchema, b);
    expect(!r.ok && formatFailure(r.error)).toBe('shards[0].state must be one of starting, ready, failed, stopped');
  });

  it('rejects unknown catalog keys, so a typo is not silently "no requirement"', () => {
    const r = validate(CatalogSchema, { models: [{ name: 'm', source: 's', profiles: [{ name: 'p', engine: 'vllm', min_memroy_gb: 3 }] }] });
    expect(!r.ok && r.error).toEqual({ field: 'models[0].profiles[0].min_memroy_gb', message: 'is not a known field' });
  });

  it('a missing top-level field is named without a dot', () => {
    const r = validate(NodeStateRequestSchema, {});
    expect(!r.ok && r.error.field).toBe('state');
  });

  it('fieldPath renders JSON pointers with a root', () => {
    expect(fieldPath('/a/0/b~1c', 'body')).toBe('body.a[0].b/c');
    expect(fieldPath('')).toBe('(body)');
  });
});

describe('validateAll', () => {
  const profile = (extra: Record<string, unknown>) => ({ name: 'p', engine: 'vllm', ...extra });
  const catalog = (...profiles: Record<string, unknown>[]) => ({ models: [{ name: 'm', source: 's', profiles }] });

  it('accepts what validate accepts', () => {
    expect(validateAll(CatalogSchema, catalog(profile({})))).toEqual({ ok: true, value: catalog(profile({})) });
  });

  it('reports every broken field, once each, with the options of a union', () => {
    const r = validateAll(CatalogSchema, catalog(profile({ engine: 'vlm', gpus: 'x' }), profile({ min_memroy_gb: 3, name: '-' + 'a'.repeat(300) })));
    expect(!r.ok && r.errors).toEqual([
      {
        field: 'models[0].profiles[0].engine',
        message: 'must be one of vllm, sglang, llama.cpp, node-llama-cpp, command',
        options: ['vllm', 'sglang', 'llama.cpp', 'node-llama-cpp', 'command'],
      },
      { field: 'models[0].profiles[0].gpus', message: 'must be integer' },
      { field: 'models[0].profiles[1].min_memroy_gb', message: 'is not a known field' },
      { field: 'models[0].profiles[1].name', message: 'must NOT have more than 200 characters' },
    ]);
  });
});
