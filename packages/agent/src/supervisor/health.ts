import http from 'node:http';
import got from 'got';
import type { ShardAssignment } from '@llmgw/shared';

/** No keep-alive: an engine's port may be reused by another engine after a restart. */
const probeAgent = new http.Agent({ keepAlive: false });

/** Probe timeout: 5 s (agent.md §3), shorter when polling faster so that probes do not pile up. */
export const probeTimeoutMs = (intervalMs: number): number => Math.min(5_000, Math.max(250, intervalMs * 5));

/** The address to probe an engine bound to `bindHost` at: a wildcard is probed through loopback. */
export function probeHost(bindHost: string): string {
  if (bindHost === '' || bindHost === '0.0.0.0') return '127.0.0.1';
  if (bindHost === '::') return '[::1]';
  return bindHost.includes(':') ? `[${bindHost}]` : bindHost;
}

/**
 * Readiness per agent.md §3: `/health` answers 200 and, unless only liveness is wanted,
 * `/v1/models` lists the served name. Connection refused and 503 are normal while loading.
 * Null when healthy; else why not.
 */
export async function probeEngine(base: string, a: ShardAssignment, full: boolean, timeoutMs = 5_000): Promise<string | null> {
  const options = {
    throwHttpErrors: false,
    retry: { limit: 0 },
    timeout: { request: timeoutMs },
    agent: { http: probeAgent },
    headers: a.api_key ? { authorization: `Bearer ${a.api_key}` } : {},
  };
  try {
    const health = await got(`${base}/health`, options);
    if (health.statusCode !== 200) return `/health answered ${health.statusCode}`;
    if (!full) return null;
    const models = await got(`${base}/v1/models`, options);
    if (models.statusCode !== 200) return `/v1/models answered ${models.statusCode}`;
    const ids = modelIds(models.body);
    return ids.includes(a.model) ? null : `/v1/models does not list "${a.model}" (it lists ${JSON.stringify(ids)})`;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The `id`s of an OpenAI model list; [] for anything else. */
export function modelIds(body: string): string[] {
  try {
    const parsed = JSON.parse(body) as { data?: unknown };
    if (!Array.isArray(parsed.data)) return [];
    return parsed.data.flatMap((m: unknown) => {
      const id = (m as { id?: unknown } | null)?.id;
      return typeof id === 'string' ? [id] : [];
    });
  } catch {
    return [];
  }
}
