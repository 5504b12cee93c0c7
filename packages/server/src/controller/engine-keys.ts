import { createHmac } from 'node:crypto';
import { newSecret } from '@llmgw/shared';

/** Gives each replica its engine key. */
export type EngineKeyOf = (replicaId: string) => string;

/**
 * Engine keys derived, not stored: HMAC-SHA256(secret, replica id). The server keeps only
 * the secret (`<data-dir>/engine-key-secret`, 0600) and recomputes a replica's key when
 * it loads the replica, so a copy of the database holds no key that calls an engine.
 * Deterministic, so every restart gives a replica the key its running engine has.
 */
export function engineKeys(secret: string): EngineKeyOf {
  return (replicaId) => `sk-llmgw-engine-${createHmac('sha256', secret).update(`llmgw engine key v1\u0000${replicaId}`).digest('base64url')}`;
}

/** A secret for one process only (tests, and servers built without a data directory's secret). */
export function ephemeralEngineKeys(): EngineKeyOf {
  return engineKeys(newSecret('', 32));
}
