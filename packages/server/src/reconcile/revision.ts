import { createHash } from 'node:crypto';
import type { Model } from '@llmgw/shared';

/**
 * Catalog fields that do not change what an engine process runs: a reload that changes
 * only these restarts nothing. Every other field (engine, source and digest, args, env,
 * command, gpus, shards, the profiles' requirements) is in the revision, so a field added
 * to the catalog later restarts replicas by default rather than silently not reaching them.
 */
const NOT_IN_REVISION: ReadonlySet<string> = new Set(['name', 'aliases', 'scaling', 'fallbacks', 'routing', 'adapter_routing', 'rollout']);
/** A profile's fields that only the gateway reads (from the catalog as it is now): `responses_api` says how to send `/v1/responses`, not what the engine runs. */
const PROFILE_NOT_IN_REVISION: ReadonlySet<string> = new Set(['responses_api']);

/** What a model's revision is a digest of: the model without `NOT_IN_REVISION`, keys sorted. */
export function revisionContent(model: Model): Record<string, unknown> {
  const content: Record<string, unknown> = {};
  for (const key of Object.keys(model).sort()) {
    if (NOT_IN_REVISION.has(key)) continue;
    const value = (model as Record<string, unknown>)[key];
    content[key] = canonical(key === 'profiles' && Array.isArray(value) ? value.map(withoutGatewayFields) : value);
  }
  return content;
}

function withoutGatewayFields(profile: unknown): unknown {
  if (!profile || typeof profile !== 'object') return profile;
  return Object.fromEntries(Object.entries(profile).filter(([k]) => !PROFILE_NOT_IN_REVISION.has(k)));
}

/**
 * A model's revision: 12 hex digits of the SHA-256 of its `revisionContent`. The same
 * content always gives the same revision, so a file reverted to an earlier content is
 * that earlier revision again and its running replicas are current.
 */
export function revisionOf(model: Model): string {
  return createHash('sha256')
    .update(JSON.stringify(revisionContent(model)))
    .digest('hex')
    .slice(0, 12);
}

/** Objects with their keys sorted, so that the order keys are written in changes nothing. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[k];
      if (v !== undefined) out[k] = canonical(v);
    }
    return out;
  }
  return value;
}

const MAX_CHANGE_CHARS = 240;

/**
 * What changed from one revision's content to the next, in one line for `ctl rollout
 * history`: `profiles.gpu.args: ["--a"] → ["--b"]; env.HF_HOME changed`. Profiles are
 * named by name, not position. Values of `env` and of a source with credentials or a
 * query are never shown (they may hold secrets; the history is shown to viewers).
 */
export function describeChange(before: Record<string, unknown> | undefined, after: Record<string, unknown>): string {
  if (!before) return 'first revision';
  const a = flatten(before);
  const b = flatten(after);
  const parts: string[] = [];
  for (const [path, value] of b) {
    const old = a.get(path);
    if (old === undefined) parts.push(`${path}: ${shown(path, value)} (added)`);
    else if (old !== value) parts.push(hidden(path, old) || hidden(path, value) ? `${path} changed` : `${path}: ${old} → ${value}`);
  }
  for (const path of a.keys()) if (!b.has(path)) parts.push(`${path} removed`);
  if (!parts.length) return 'no change';
  const line = parts.join('; ');
  return line.length > MAX_CHANGE_CHARS ? `${line.slice(0, MAX_CHANGE_CHARS - 1)}…` : line;
}

function flatten(content: Record<string, unknown>): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (value: unknown, path: string): void => {
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) walk(v, path ? `${path}.${k}` : k);
    } else if (path === 'profiles' && Array.isArray(value)) {
      for (const p of value as { name?: string }[]) walk(p, `profiles.${p.name ?? '?'}`);
    } else {
      out.set(path, JSON.stringify(value));
    }
  };
  walk(content, '');
  return out;
}

function hidden(path: string, value: string): boolean {
  return /(^|\.)env\./.test(path) || (/(^|\.)source$/.test(path) && /[@?]/.test(value));
}

function shown(path: string, value: string): string {
  return hidden(path, value) ? '…' : value;
}
