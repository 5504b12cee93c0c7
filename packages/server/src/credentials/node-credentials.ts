import { findBySecret, hashSecret, newSecret } from '@llmgw/shared';
import { DomainError } from '../errors.js';
import type { Store, StoredCredential } from '../store/store.js';
import { latestRead } from '../store/serial.js';

/**
 * Each node's own credential (this directory's README.md), issued once when it joins and bound to its
 * id: whoever holds it may report and read that node only. The store keeps the hashes;
 * memory keeps a map by hash, so a heartbeat is authenticated without touching the
 * database, and still while the store is degraded. A credential is 256 random bits
 * (`llmgw-node-…`), kept as `hashSecret` of it and found with `findBySecret`, like
 * every other secret llmgw issues.
 */
export class NodeCredentials {
  private readonly byHash = new Map<string, { nodeId: string; hash: string }>();
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

  /** Replaces what memory holds with the store's credentials (another instance issued or forgot one); one read at a time (`latestRead`). */
  readonly reload = latestRead(
    () => this.store.loadCredentials(),
    (stored) => {
      this.byHash.clear();
      this.byNode.clear();
      for (const c of stored) this.remember(c.nodeId, c.hash);
    },
    // Nodes join in bursts (a fleet brought up), a NOTIFY each: read a burst a few times.
    { burstMs: 100 },
  );

  /** Whether the node has joined with a credential (a node from before issue 12 has not). */
  has(nodeId: string): boolean {
    return this.byNode.has(nodeId);
  }

  /**
   * Issues the credential of a node that has none, written to the store before it is
   * handed out (a refused write is a 503 and changes nothing). A node that has one is
   * refused: a second machine must never take over a joined node's name — unless this is
   * the join that issued it, again (`joinId`, a secret of the agent's: its retry after a
   * lost reply). Then a fresh credential replaces that one, in the store's one statement,
   * so the node never has two that work.
   */
  async issue(nodeId: string, now: Date, joinId?: string): Promise<string> {
    if (this.byNode.has(nodeId) && joinId === undefined) throw taken(nodeId);
    const secret = newSecret('llmgw-node-', 32);
    const hash = hashSecret(secret);
    // The store decides, atomically: another join of this id (here, in flight, or at
    // another instance) may have been issued one since the check above.
    const joinHash = joinId === undefined ? undefined : hashSecret(`join:${joinId}`);
    if (!(await this.store.addCredential({ nodeId, hash, createdAt: now.toISOString(), ...(joinHash ? { joinHash } : {}) }))) throw taken(nodeId);
    this.forget(nodeId);
    this.remember(nodeId, hash);
    return secret;
  }

  /** The node a credential belongs to; undefined for anything else (a join token included). */
  nodeOf(secret: string): string | undefined {
    return findBySecret(this.byHash, secret)?.nodeId;
  }

  /** Drops a node's credential from memory; the store's row goes with the node (`Store.deleteNode`). */
  forget(nodeId: string): void {
    const hash = this.byNode.get(nodeId);
    if (hash) this.byHash.delete(hash);
    this.byNode.delete(nodeId);
  }

  private remember(nodeId: string, hash: string): void {
    this.byHash.set(hash, { nodeId, hash });
    this.byNode.set(nodeId, hash);
  }
}

/** The refusal of a second join of one node id. */
function taken(nodeId: string): DomainError {
  return new DomainError(
    'conflict',
    `node "${nodeId}" has already joined with its own credential, so another machine cannot take its name; ` +
      `if this machine replaces it, free the name with: ctl nodes delete ${nodeId} (or start this agent with another --node-id)`,
  );
}
