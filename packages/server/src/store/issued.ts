import { findBySecret } from '@llmgw/shared';

/** What every issued secret's record holds: client keys and admin-listener tokens alike. */
export interface IssuedRecord {
  id: string;
  name: string;
  /** `hashSecret` of the secret, which is never kept. */
  hash: string;
  revokedAt?: string;
}

/**
 * The records of secrets llmgw issued and keeps by hash (client keys, admin-listener
 * tokens), in memory by hash and by id: a request is authenticated without touching the
 * database, and still while the store is unavailable. A change is written to the store
 * (`save`) before memory changes, so one the store refuses leaves the records as they were.
 */
export class IssuedSecrets<T extends IssuedRecord> {
  private byHash = new Map<string, T>();
  private byId = new Map<string, T>();

  constructor(records: readonly T[] = []) {
    this.replace(records);
  }

  /** Replaces every record with the store's (a reload: another instance issued or revoked one). */
  replace(records: readonly T[]): void {
    this.byHash = new Map(records.map((r) => [r.hash, r]));
    this.byId = new Map(records.map((r) => [r.id, r]));
  }

  /** The record `secret` is, found by hash and confirmed in constant time; revoked ones included. */
  find(secret: string): T | undefined {
    return findBySecret(this.byHash, secret);
  }

  get(id: string): T | undefined {
    return this.byId.get(id);
  }

  all(): T[] {
    return [...this.byId.values()];
  }

  /**
   * Writes a new or changed record with `save`, then (only once the store took it) keeps
   * it. Revocation is one-way, here as in the stores' upserts: a change made from a copy
   * taken before a revoke that landed meanwhile keeps the revocation.
   */
  async put(record: T, save: (record: T) => Promise<void>): Promise<void> {
    await save(record);
    const before = this.byId.get(record.id);
    if (before) this.byHash.delete(before.hash);
    const kept = before?.revokedAt && !record.revokedAt ? { ...record, revokedAt: before.revokedAt } : record;
    this.byId.set(record.id, kept);
    this.byHash.set(record.hash, kept);
  }

  /**
   * Revokes by id, or by the name of a live record (names may repeat once revoked), at
   * `at` (ISO 8601); one revoked already stays as it was. Returns the record as it now
   * is, or undefined when there is none.
   */
  async revoke(idOrName: string, at: string, save: (record: T) => Promise<void>): Promise<T | undefined> {
    const found = this.byId.get(idOrName) ?? this.all().find((r) => r.name === idOrName && !r.revokedAt);
    if (!found || found.revokedAt) return found;
    const revoked = { ...found, revokedAt: at };
    await this.put(revoked, save);
    return revoked;
  }
}
