import { createHash, randomBytes } from 'node:crypto';
import { DomainError } from '../errors.js';
import type { Store, StoredCredential } from '../store/store.js';
import { latestRead } from '../store/serial.js';

/** How a credential is kept: its SHA-256 in hex, never the secret itself. */
export function hashCredential(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** A fresh node credential: 256 random bits, prefixed so a leaked one is recognisable. */
export function newCredential(): string {
  return `llmgw-node-${randomBytes(32).toString('base64url')}`;
}

/**
 * Each node's own credential (this directory's README.md), issued once when it joins and bound to its
 * id: whoever holds it may report and read that node only. The store keeps the hashes;
 * memory keeps a map by hash, so a heartbeat is authenticated without touching the
 * database, and still while the store is degraded. Looking a secret up by its hash
 * needs no constant-time compare: timing can reveal at most a prefix of a hash, which
 * says nothing about a 256-bit secret.
 */
export class NodeCredentials {
  private readonly byHash = new Map<string, string>();
  private readonly byNode = new Map<string, string>();

  constructor(
    private readonly store: Store,
    stored: readonly StoredCredential[] = [],
  ) {
    for (const c of stored) this.remember(c.nodeId, c.hash);
  }

  /** The credentials the store holds. */
  static async load(store: Store): Promise<NodeCredentials> {
    return new NodeCredentials(store, await store.loadCredentials());
  }

  /** Replaces what memory holds with the store's credentials (another instance issued or forgot one); the newest read wins. */
  readonly reload = latestRead(
    () => this.store.loadCredentials(),
    (stored) => {
      this.byHash.clear();
      this.byNode.clear();
      for (const c of stored) this.remember(c.nodeId, c.hash);
    },
  );

  /** Whether the node has joined with a credential (a node from before issue 12 has not). */
  has(nodeId: string): boolean {
    return this.byNode.has(nodeId);
  }

  /**
   * Issues the credential of a node that has none, written to the store before it is
   * handed out (a refused write is a 503 and changes nothing). A node that has one is
   * refused: a second machine must never take over a joined node's name.
   */
  async issue(nodeId: string, now: Date): Promise<string> {
    if (this.byNode.has(nodeId)) {
      throw new DomainError(
        'conflict',
        `node "${nodeId}" has already joined with its own credential, so another machine cannot take its name; ` +
          `if this machine replaces it, free the name with: ctl nodes delete ${nodeId} (or start this agent with another --node-id)`,
      );
    }
    const secret = newCredential();
    const hash = hashCredential(secret);
    await this.store.saveCredential({ nodeId, hash, createdAt: now.toISOString() });
    this.remember(nodeId, hash);
    return secret;
  }

  /** The node a credential belongs to; undefined for anything else (a join token included). */
  nodeOf(secret: string): string | undefined {
    return this.byHash.get(hashCredential(secret));
  }

  /** Drops a node's credential from memory; the store's row goes with the node (`Store.deleteNode`). */
  forget(nodeId: string): void {
    const hash = this.byNode.get(nodeId);
    if (hash) this.byHash.delete(hash);
    this.byNode.delete(nodeId);
  }

  private remember(nodeId: string, hash: string): void {
    this.byHash.set(hash, nodeId);
    this.byNode.set(nodeId, hash);
  }
}
