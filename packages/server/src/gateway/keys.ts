import { randomBytes } from 'node:crypto';
import { newHashedSecret, type KeyCreateRequest, type KeyRevokeReply, type KeyUpdateRequest, type KeyView, type UsageRow } from '@llmgw/shared';
import { DomainError } from '../errors.js';
import { IssuedSecrets } from '../store/issued.js';
import { latestRead, serialWrites } from '../store/serial.js';
import { minuteOf, saturatingAdd, type Store, type StoredKey, type StoredUsage, type UsageDelta } from '../store/store.js';
import { TokenWindow } from './token-window.js';

export type AuthResult = { ok: true; key: StoredKey } | { ok: false; reason: 'missing' | 'invalid' | 'revoked' | 'expired' };

export type Admission = { ok: true; release: () => void } | { ok: false; reason: 'rpm' | 'tpm' | 'concurrency'; retryAfterS: number };

/** The other instances' counts per key (`SharedLimits`), which a ring adds to its own. */
export interface OtherInstances {
  othersRequests(keyId: string): number;
  othersInFlight(keyId: string): number;
  /** Tokens the others counted for the key in the last minute. */
  othersTokens(keyId: string): number;
}

/** What one instance counted for a key, for the others (`SharedLimits`). */
export interface LocalKeyCount {
  requests: number;
  inFlight: number;
  tokens: number;
}

/**
 * Client API keys: created and revoked through the admin API, checked on every gateway
 * request without touching the database (an in-memory map by hash, rebuilt on change),
 * with per-key request-rate and concurrency limits. The process is single-threaded, so
 * check-and-count happens in one synchronous step and six requests arriving at once
 * cannot all slip under a limit of five.
 *
 * Persistence: a key is written to the store before memory changes, so a create or
 * revoke the store refuses (503 `store_unavailable`) leaves the keys as they were.
 * Usage is counted in memory and written in batches; a batch the store refuses stays
 * pending and is retried at the next flush, so no request is lost or counted twice.
 * `usageRows` answers from memory (stored totals plus pending), so it works while the
 * store is down.
 */
export class KeyRing {
  private readonly keys = new IssuedSecrets<StoredKey>();
  /** Start times of recent requests per key, oldest first (only for keys with an rpm). */
  private readonly recent = new Map<string, number[]>();
  private readonly inFlight = new Map<string, number>();
  /** Tokens of the last minute per key, from the engines' reported usage (only for keys with a tpm). */
  private readonly tokens = new Map<string, TokenWindow>();
  /** Usage not yet written to the store, per key and model. */
  private usage = new Map<string, UsageDelta>();
  /** Every request's usage since the store was created: what is stored plus `usage`. */
  private readonly totals = new Map<string, UsageDelta>();
  private flushTimer?: NodeJS.Timeout;
  /**
   * Told of usage rows the store refused for their values (skipped so the rest are
   * written, see `Store.addUsage`); the server logs them. Such rows are dropped from
   * what is pending, since sending them again would fail again.
   */
  onUsageRefused: (rows: readonly UsageDelta[]) => void = () => {};

  constructor(
    private readonly store: Store,
    private readonly now: () => number = Date.now,
    stored: { keys: readonly StoredKey[]; usage: readonly StoredUsage[] } = { keys: [], usage: [] },
    /**
     * What other server instances counted for each key, last synced (cluster/limits.ts):
     * added to this instance's own counts, so a key's limits hold across instances with no
     * database round trip per request. Absent: this instance alone.
     */
    private readonly others?: OtherInstances,
  ) {
    this.keys.replace(stored.keys);
    for (const u of stored.usage) {
      const { keyId, model, requests, errors, cancelled, promptTokens, completionTokens } = u;
      this.totals.set(usageId(keyId, model), { keyId, model, requests, errors, cancelled, promptTokens, completionTokens });
    }
    this.flushTimer = setInterval(() => void this.flushUsage(), 2000);
    this.flushTimer.unref();
  }

  /** The keys and usage totals the store holds. */
  static async load(store: Store, now: () => number = Date.now, others?: OtherInstances): Promise<KeyRing> {
    return new KeyRing(store, now, { keys: await store.loadKeys(), usage: await store.loadUsage() }, others);
  }

  /** Replaces the keys in memory with the store's (another instance created or revoked one); the newest read wins. */
  readonly reloadKeys = latestRead(
    () => this.store.loadKeys(),
    (keys) => this.keys.replace(keys),
  );

  private readonly save = (key: StoredKey) => this.store.saveKey(key);

  async create(req: KeyCreateRequest, resolveModel: (name: string) => string | undefined): Promise<{ key: KeyView; secret: string }> {
    let expiresAt: string | undefined;
    if (req.expires_at) {
      const t = Date.parse(req.expires_at);
      if (Number.isNaN(t))
        throw new DomainError('invalid_request', `expires_at "${req.expires_at}" is not a date (want ISO 8601, e.g. 2027-01-31T00:00:00Z)`, {
          field: 'expires_at',
        });
      if (t <= this.now()) throw new DomainError('invalid_request', `expires_at ${req.expires_at} is in the past`, { field: 'expires_at' });
      expiresAt = new Date(t).toISOString();
    }
    const models = (req.models ?? []).map((m, i) => {
      const name = resolveModel(m);
      if (!name) throw new DomainError('invalid_request', `models[${i}] "${m}" is not a model in the catalog`, { field: `models[${i}]` });
      return name;
    });
    const { secret, hash, prefix } = newHashedSecret('sk-llmgw-');
    const key: StoredKey = {
      id: `key-${randomBytes(4).toString('hex')}`,
      name: req.name,
      hash,
      prefix,
      models: [...new Set(models)],
      ...(req.rpm ? { rpm: req.rpm } : {}),
      ...(req.max_concurrent ? { maxConcurrent: req.max_concurrent } : {}),
      ...(req.tpm ? { tpm: req.tpm } : {}),
      ...(req.priority ? { priority: req.priority } : {}),
      ...(expiresAt ? { expiresAt } : {}),
      createdAt: new Date(this.now()).toISOString(),
    };
    await this.keys.put(key, this.save);
    return { key: keyView(key), secret };
  }

  /**
   * Changes a key's models, limits or band (by id, or by the name of a live key); a field
   * left out stays, `null` removes it. A revoked key is not changed (409). Counts kept
   * for a limit the key already had go on against its new value; a limit it did not have
   * counts from now (requests and tokens are only counted for keys with a limit).
   */
  async update(idOrName: string, req: KeyUpdateRequest, resolveModel: (name: string) => string | undefined): Promise<KeyView> {
    const found = this.keys.get(idOrName) ?? this.keys.all().find((k) => k.name === idOrName && !k.revokedAt);
    if (!found) throw new DomainError('not_found', `no key "${idOrName}" (see ctl keys list)`);
    if (found.revokedAt) throw new DomainError('conflict', `key ${found.id} ("${found.name}") is revoked; create a new one (ctl keys create)`);
    const next: StoredKey = { ...found };
    if (req.models) {
      next.models = [
        ...new Set(
          req.models.map((m, i) => {
            const name = resolveModel(m);
            if (!name) throw new DomainError('invalid_request', `models[${i}] "${m}" is not a model in the catalog`, { field: `models[${i}]` });
            return name;
          }),
        ),
      ];
    }
    const set = <F extends 'rpm' | 'maxConcurrent' | 'tpm' | 'priority'>(field: F, v: StoredKey[F] | null | undefined) => {
      if (v === undefined) return;
      if (v === null) delete next[field];
      else next[field] = v;
    };
    set('rpm', req.rpm);
    set('maxConcurrent', req.max_concurrent);
    set('tpm', req.tpm);
    set('priority', req.priority);
    await this.keys.put(next, this.save);
    return keyView(next);
  }

  list(): KeyView[] {
    return this.keys.all().map(keyView);
  }

  /** Revokes a key; `already` when it was revoked before (it keeps that time), as cordon says. */
  async revoke(idOrName: string): Promise<KeyRevokeReply> {
    const at = new Date(this.now()).toISOString();
    const key = await this.keys.revoke(idOrName, at, this.save);
    if (!key) throw new DomainError('not_found', `no key "${idOrName}" (see ctl keys list)`);
    // A key revoked by this call carries this call's time; one revoked before keeps its own.
    return { ...keyView(key), ...(key.revokedAt !== at ? { already: true } : {}) };
  }

  authenticate(secret: string | undefined): AuthResult {
    if (!secret) return { ok: false, reason: 'missing' };
    const key = this.keys.find(secret);
    if (!key) return { ok: false, reason: 'invalid' };
    if (key.revokedAt) return { ok: false, reason: 'revoked' };
    if (key.expiresAt && Date.parse(key.expiresAt) <= this.now()) return { ok: false, reason: 'expired' };
    return { ok: true, key };
  }

  /** Counts a request against the key's limits, or says which limit it hit. */
  admit(key: StoredKey): Admission {
    const now = this.now();
    // Both limits are checked before either is counted: a request refused by one limit
    // must not use up the other (a refused request is not a request served this minute).
    let times: number[] | undefined;
    if (key.rpm) {
      times = this.recent.get(key.id) ?? [];
      while (times.length && times[0]! <= now - 60_000) times.shift();
      this.recent.set(key.id, times);
      if (times.length >= key.rpm) {
        return { ok: false, reason: 'rpm', retryAfterS: Math.max(1, Math.ceil((times[0]! + 60_000 - now) / 1000)) };
      }
      // The others' counts change at every sync, so their part of a refusal is short-lived.
      if (this.others && times.length + this.others.othersRequests(key.id) >= key.rpm) return { ok: false, reason: 'rpm', retryAfterS: 1 };
    }
    if (key.tpm) {
      const refused = this.overTpm(key, key.tpm, now);
      if (refused) return refused;
    }
    const n = this.inFlight.get(key.id) ?? 0;
    if (key.maxConcurrent && n + (this.others?.othersInFlight(key.id) ?? 0) >= key.maxConcurrent) return { ok: false, reason: 'concurrency', retryAfterS: 1 };
    times?.push(now);
    if (key.maxConcurrent) {
      this.inFlight.set(key.id, n + 1);
      let released = false;
      return {
        ok: true,
        release: () => {
          if (released) return;
          released = true;
          this.inFlight.set(key.id, (this.inFlight.get(key.id) ?? 1) - 1);
        },
      };
    }
    return { ok: true, release: () => {} };
  }

  /**
   * A key at or over its tokens per minute: this instance's window plus the others'. The
   * quota is checked when a request arrives and counted when it ends (the engine reports
   * usage last), so requests let in under the quota may end above it, by what they were
   * still to be served. Retry-After is when enough of this instance's tokens leave the
   * window; where the others' share alone fills it, 1 s, as theirs changes at every sync.
   */
  private overTpm(key: StoredKey, tpm: number, now: number): Admission | undefined {
    const w = this.tokens.get(key.id);
    const others = this.others?.othersTokens(key.id) ?? 0;
    const own = w?.total(now) ?? 0;
    if (own + others < tpm) return undefined;
    const room = tpm - others;
    const retryAfterS = room > 0 && w ? w.retryAfterS(room, now) : 1;
    return { ok: false, reason: 'tpm', retryAfterS: Math.max(1, retryAfterS) };
  }

  /** Tokens a key was served in the last minute on this instance (0 for a key without a tpm). */
  tokensInWindow(keyId: string): number {
    return this.tokens.get(keyId)?.total(this.now()) ?? 0;
  }

  /** This instance's counts of each key with a limit, for the other instances (SharedLimits' source). */
  *localCounts(): Iterable<readonly [string, LocalKeyCount]> {
    const now = this.now();
    const ids = new Set([...this.recent.keys(), ...this.inFlight.keys(), ...this.tokens.keys()]);
    for (const id of ids) {
      const times = this.recent.get(id);
      while (times?.length && times[0]! <= now - 60_000) times.shift();
      const requests = times?.length ?? 0;
      const inFlight = this.inFlight.get(id) ?? 0;
      const w = this.tokens.get(id);
      const tokens = w?.total(now) ?? 0;
      // A window with nothing left in it is dropped, so a key idle for a minute costs nothing.
      if (w && !tokens) this.tokens.delete(id);
      if (requests || inFlight || tokens) yield [id, { requests, inFlight, tokens }] as const;
    }
  }

  /** Adds to a key's usage; written to the store in batches, off the request path. */
  recordUsage(keyId: string, model: string, u: { promptTokens?: number; completionTokens?: number; error?: boolean; cancelled?: boolean }): void {
    const now = this.now();
    const minuteMs = minuteOf(now);
    const tokens = (u.promptTokens ?? 0) + (u.completionTokens ?? 0);
    if (tokens > 0 && this.keys.get(keyId)?.tpm) {
      let w = this.tokens.get(keyId);
      if (!w) this.tokens.set(keyId, (w = new TokenWindow()));
      w.add(tokens, now);
    }
    // Pending usage is kept per minute too, for `usage_minutes` (ctl usage --since).
    const id = usageId(keyId, model);
    let minute = this.usage.get(`${id}\u0000${minuteMs}`);
    if (!minute) this.usage.set(`${id}\u0000${minuteMs}`, (minute = { ...emptyUsage(keyId, model), minuteMs }));
    let total = this.totals.get(id);
    if (!total) this.totals.set(id, (total = emptyUsage(keyId, model)));
    addUsage(minute, u);
    addUsage(total, u);
  }

  /**
   * Writes the pending usage in one transaction. Cleared only once written: when the
   * store fails, the batch stays and the next flush (every 2 s) sends it again,
   * together with what was counted since. Returns whether nothing is left pending.
   */
  // One flush at a time: a second would send the same deltas again.
  readonly flushUsage = serialWrites(
    () => this.usage.size > 0,
    () => this.writeUsage(),
  );

  private async writeUsage(): Promise<boolean> {
    // What is counted while the write is under way goes into a new batch.
    const batch = this.usage;
    this.usage = new Map();
    try {
      const refused = await this.store.addUsage([...batch.values()]);
      if (refused.length) this.onUsageRefused(refused);
    } catch {
      // The store reports and counts its own failures (GuardedStore); the batch is merged
      // back so nothing is lost, and the next flush sends it with what came since.
      for (const [id, d] of batch) {
        const now = this.usage.get(id);
        if (!now) this.usage.set(id, d);
        else for (const f of ['requests', 'errors', 'cancelled', 'promptTokens', 'completionTokens'] as const) now[f] = saturatingAdd(now[f], d[f]);
      }
      return false;
    }
    return true;
  }

  /** Usage per key and model, from memory: it answers while the store is unavailable. */
  usageRows(): UsageRow[] {
    const rows = [...this.totals.values()].map((u) => usageRow(u, this.keys.get(u.keyId)?.name ?? u.keyId));
    const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    return rows.sort((a, b) => cmp(a.key_name, b.key_name) || cmp(a.model, b.model));
  }

  /**
   * Usage per key and model over the minutes from the one `sinceMs` is in, from the store
   * (on PostgreSQL: every instance's, as flushed; each flushes every 2 s). This instance's
   * pending usage is written first, so its own requests are all in. Needs the store: 503
   * `store_unavailable` while it is down.
   */
  async usageSince(sinceMs: number): Promise<UsageRow[]> {
    await this.flushUsage();
    const rows = await this.store.loadUsage(sinceMs);
    return rows.map((u) => usageRow(u, this.keys.get(u.keyId)?.name ?? u.keyName));
  }

  /** Stops the flush timer and writes what is pending; returns the requests it could not write. */
  async close(): Promise<number> {
    if (this.flushTimer) clearInterval(this.flushTimer);
    if (await this.flushUsage()) return 0;
    return [...this.usage.values()].reduce((n, d) => n + d.requests, 0);
  }
}

const usageId = (keyId: string, model: string) => `${keyId}\u0000${model}`;

const emptyUsage = (keyId: string, model: string) => ({ keyId, model, requests: 0, errors: 0, cancelled: 0, promptTokens: 0, completionTokens: 0 });

/** One request's usage added to a sum, saturating: a sum held at MAX_USAGE_COUNT stays exact and fits every store. */
function addUsage(d: Omit<UsageDelta, 'minuteMs'>, u: { promptTokens?: number; completionTokens?: number; error?: boolean; cancelled?: boolean }): void {
  d.requests = saturatingAdd(d.requests, 1);
  if (u.error) d.errors = saturatingAdd(d.errors, 1);
  if (u.cancelled) d.cancelled = saturatingAdd(d.cancelled, 1);
  if (u.promptTokens) d.promptTokens = saturatingAdd(d.promptTokens, u.promptTokens);
  if (u.completionTokens) d.completionTokens = saturatingAdd(d.completionTokens, u.completionTokens);
}

/** The API's row of a key's usage of one model, under the key's name. */
function usageRow(u: Omit<UsageDelta, 'minuteMs'>, keyName: string): UsageRow {
  return {
    key_id: u.keyId,
    key_name: keyName,
    model: u.model,
    requests: u.requests,
    errors: u.errors,
    cancelled: u.cancelled,
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
  };
}

function keyView(k: StoredKey): KeyView {
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    models: k.models,
    ...(k.rpm ? { rpm: k.rpm } : {}),
    ...(k.maxConcurrent ? { max_concurrent: k.maxConcurrent } : {}),
    ...(k.tpm ? { tpm: k.tpm } : {}),
    ...(k.priority ? { priority: k.priority } : {}),
    ...(k.expiresAt ? { expires_at: k.expiresAt } : {}),
    created_at: k.createdAt,
    ...(k.revokedAt ? { revoked_at: k.revokedAt } : {}),
  };
}
