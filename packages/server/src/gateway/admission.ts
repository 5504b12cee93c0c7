import type { Model } from '@llmgw/shared';
import { bearerToken } from '../http/principal.js';
import { DomainError } from '../errors.js';
import type { StoredKey } from '../store/store.js';
import { BANDS, DEFAULT_BAND, isBand, lowerOf, type Band } from './fair-queue.js';
import { clip } from './request.js';
import type { KeyRing } from './keys.js';

const AUTH_MESSAGE = {
  missing: 'You didn\u2019t provide an API key. Send it as "Authorization: Bearer <key>" (create one with ctl keys create).',
  invalid: 'Incorrect API key provided.',
  revoked: 'This API key has been revoked.',
  expired: 'This API key has expired.',
} as const;

/** The API key of a request, from `Authorization: Bearer <key>`; every request but /healthz needs one. */
export function authenticate(keys: KeyRing, authorization: string | undefined): StoredKey {
  const r = keys.authenticate(bearerToken(authorization));
  if (r.ok) return r.key;
  throw new DomainError('unauthenticated', AUTH_MESSAGE[r.reason]);
}

/** Whether a key may list or call a model: a key without a model list may use all. */
export function mayUse(key: StoredKey, model: string): boolean {
  return key.models.length === 0 || key.models.includes(model);
}

/**
 * Lets a request for `model` in under the key's model list and limits. Returns what to
 * call when the request is over, which gives its concurrency slot back.
 */
export function admit(keys: KeyRing, key: StoredKey, model: Model): () => void {
  checkModel(key, model.name);
  return admitLimits(keys, key);
}

/** Refuses a model (or LoRA adapter, by its own name) outside the key's model list. */
export function checkModel(key: StoredKey, name: string): void {
  if (!mayUse(key, name)) {
    throw new DomainError('model_not_allowed', `this API key may not use model \`${name}\` (allowed: ${key.models.join(', ')})`, { field: 'model' });
  }
}

/**
 * Counts a request against the key's per-minute (requests and tokens) and concurrency
 * limits, before its body is read. Returns what gives the concurrency slot back.
 */
export function admitLimits(keys: KeyRing, key: StoredKey): () => void {
  const a = keys.admit(key);
  if (a.ok) return a.release;
  if (a.reason === 'rpm') {
    throw new DomainError('rate_limited', `rate limit of ${key.rpm} requests per minute reached for this key`, { retryAfterS: a.retryAfterS, reason: 'rpm' });
  }
  if (a.reason === 'tpm') {
    throw new DomainError('rate_limited', `tpm: token quota of ${key.tpm} tokens per minute reached for this key; retry after ${a.retryAfterS} s`, {
      retryAfterS: a.retryAfterS,
      reason: 'tpm',
    });
  }
  throw new DomainError('concurrency_limited', `limit of ${key.maxConcurrent} concurrent requests reached for this key`, {
    retryAfterS: a.retryAfterS,
    reason: 'concurrency',
  });
}

/** The request header with which a client lowers its own priority. */
export const PRIORITY_HEADER = 'x-llmgw-priority';

/**
 * A request's priority band: its key's, or lower when the request asks for lower with
 * `x-llmgw-priority` (a batch job on an interactive key); asking for higher than the key
 * has gets the key's. A value that is no band is refused, so a typo does not pass as
 * the default.
 */
export function bandOf(key: StoredKey, header: string | string[] | undefined): Band {
  const own = key.priority ?? DEFAULT_BAND;
  if (header === undefined) return own;
  const h = Array.isArray(header) ? header[0] : header;
  if (!isBand(h)) throw new DomainError('invalid_request', `${PRIORITY_HEADER} "${clip(h ?? '')}" is not a priority (want one of ${BANDS.join(', ')})`);
  return lowerOf(own, h);
}
