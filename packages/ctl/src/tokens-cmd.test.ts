import { describe, expect, it } from '@jest/globals';
import { tokensTable } from './tables.js';

describe('tokensTable', () => {
  it('shows each token with its role and prefix, never a secret, and says how to make the first', () => {
    expect(tokensTable([])).toBe('No tokens. Create one with: ctl tokens create --name NAME --role viewer');
    const text = tokensTable([
      { id: 'tok-1', name: 'grafana', role: 'viewer', prefix: 'llmgw-viewer-abcd', created_at: '2026-01-01T00:00:00.000Z' },
      {
        id: 'tok-2',
        name: 'prom',
        role: 'metrics',
        prefix: 'llmgw-metrics-wxyz',
        created_at: '2026-01-02T00:00:00.000Z',
        revoked_at: '2026-01-03T00:00:00.000Z',
      },
    ]);
    expect(text.split('\n').map((l) => l.split(/\s{2,}/))).toEqual([
      ['ID', 'NAME', 'ROLE', 'PREFIX', 'CREATED', 'STATUS'],
      ['tok-1', 'grafana', 'viewer', 'llmgw-viewer-abcd…', '2026-01-01T00:00:00.000Z', 'active'],
      ['tok-2', 'prom', 'metrics', 'llmgw-metrics-wxyz…', '2026-01-02T00:00:00.000Z', 'revoked'],
    ]);
  });
});
