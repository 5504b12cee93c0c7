import type { Logger } from 'pino';
import type { AccessTokens } from '../api/access.js';
import type { SharedController } from '../controller/shared.js';
import type { NodeCredentials } from '../credentials/node-credentials.js';
import type { EventLog } from '../events/event-log.js';
import type { JoinToken } from '../credentials/join-token.js';
import type { KeyRing } from '../gateway/keys.js';
import type { Notifications } from '../store/notify.js';
import type { PostgresStore } from '../store/postgres.js';
import { latestRead } from '../store/serial.js';
import type { StoredNode } from '../store/store.js';
import { wantsWholeRow } from './whole-rows.js';
import { messageOf } from './db-time.js';

export interface ClusterSyncOptions {
  store: PostgresStore;
  notifications: Notifications;
  controller: SharedController;
  keys: KeyRing;
  access: AccessTokens;
  credentials: NodeCredentials;
  events: EventLog;
  /** The generated join token, which a rotation on another instance replaces here too; absent when LLMGW_JOIN_TOKEN sets it. */
  joinToken?: JoinToken;
  log: Logger;
  /** How often the node rows other instances wrote are pulled (default 500 ms). */
  pullEveryMs?: number;
  /** How far back each pull reaches behind the last one, for commits that land late (default 2000 ms). */
  overlapMs?: number;
  /** How often everything is reloaded, whatever the NOTIFYs said (default 10 s). */
  fullEveryMs?: number;
}

/**
 * Keeps this instance's memory in step with the others through the database: what
 * changes rarely (replicas, keys, tokens, node credentials, admin states, events) is
 * reloaded on the NOTIFY its writer sent in the same transaction, within a second;
 * heartbeats, which come in thousands a second, are pulled every `pullEveryMs` instead
 * (rows whose `updated_ms` is past the last pull's database clock, less `overlapMs`).
 * Every `fullEveryMs` everything is reloaded anyway, and after the LISTEN connection
 * came back (a NOTIFY sent while it was away is lost) Notifications calls every topic.
 */
export class ClusterSync {
  private cursorMs?: number;
  private timers: NodeJS.Timeout[] = [];
  private readonly off: (() => void)[] = [];
  private pulling = false;
  private failing?: string;

  constructor(private readonly o: ClusterSyncOptions) {}

  start(): void {
    const { notifications: n, controller, keys, access, credentials, events } = this.o;
    // Nodes heard through the database age only up to the last pull that worked.
    controller.inventory.heardFromDatabase(Date.now());
    const guard = (what: string, fn: () => Promise<void>) => () =>
      fn().catch((err: unknown) => this.o.log.warn({ err: messageOf(err) }, `could not reload ${what} from the database: ${messageOf(err)}`));
    this.off.push(
      n.on(
        'replicas',
        guard('replicas', () => controller.reloadReplicas()),
      ),
      n.on(
        'keys',
        guard('keys', () => keys.reloadKeys()),
      ),
      n.on(
        'tokens',
        guard('tokens', () => access.reload()),
      ),
      n.on(
        'credentials',
        guard('node credentials', () => credentials.reload()),
      ),
      n.on(
        'nodes',
        guard('nodes', () => this.reloadNodes()),
      ),
      n.on(
        'events',
        guard('events', () => events.sync()),
      ),
      n.on(
        'join-token',
        guard('the join token', () => this.adoptJoinToken()),
      ),
    );
    this.timers.push(setInterval(() => void this.pull(), this.o.pullEveryMs ?? 500));
    this.timers.push(
      setInterval(() => {
        void guard('replicas', () => controller.reloadReplicas())();
        void guard('keys', () => keys.reloadKeys())();
        void guard('tokens', () => access.reload())();
        void guard('node credentials', () => credentials.reload())();
        void guard('nodes', () => this.reloadNodes())();
      }, this.o.fullEveryMs ?? 10_000),
    );
    for (const t of this.timers) t.unref();
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    for (const f of this.off.splice(0)) f();
  }

  /**
   * The heartbeats other instances wrote since the last pull. `last_seen_ms` is the
   * database's clock; the pull's own database time turns it into this instance's clock,
   * so liveness is judged from the database's view wherever the heartbeat arrived.
   */
  async pull(): Promise<void> {
    if (this.pulling) return;
    this.pulling = true;
    try {
      const since = this.cursorMs === undefined ? 0 : this.cursorMs - (this.o.overlapMs ?? 2000);
      const { nodes, dbNowMs } = await this.o.store.loadNodesChanged(since);
      const skew = dbNowMs - Date.now();
      for (const row of nodes) this.o.controller.applyRemoteNode(row, seenAt(row, skew));
      this.cursorMs = dbNowMs;
      this.o.controller.inventory.heardFromDatabase(Date.now());
      if (this.failing) this.o.log.info('pulling heartbeats from the database again');
      this.failing = undefined;
    } catch (err) {
      const reason = messageOf(err);
      if (this.failing !== reason)
        this.o.log.warn({ err: reason }, `could not pull heartbeats from the database (routing goes on with what this instance knows): ${reason}`);
      this.failing = reason;
    } finally {
      this.pulling = false;
    }
  }

  /** A join token rotated through another instance: this one accepts the new one, and only it. */
  private async adoptJoinToken(): Promise<void> {
    const secret = await this.o.store.readSharedSecret('join-token');
    if (secret === undefined || !this.o.joinToken) return;
    if (this.o.joinToken.matches(secret)) return;
    this.o.joinToken.adopt(secret);
    this.o.log.info('join token rotated on another instance: the old token no longer joins here either');
  }

  /**
   * Admin states and deletions: every node row's head, the nodes no longer stored
   * forgotten, and whole only the rows this instance lacks (`wantsWholeRow`). One read at
   * a time, however many NOTIFYs (`latestRead`).
   */
  private readonly reloadNodes = latestRead(
    async () => {
      const { store, controller } = this.o;
      const { heads, dbNowMs } = await store.loadNodeHeads();
      const skew = dbNowMs - Date.now();
      const wanted = heads.filter((h) => wantsWholeRow(controller.inventory.get(h.id), h, seenAt(h, skew))).map((h) => h.id);
      return { heads, whole: await store.loadNodesById(wanted), skew };
    },
    ({ heads, whole, skew }) => {
      const { controller } = this.o;
      const gone = controller.inventory.keepOnly(new Set(heads.map((r) => r.id)));
      controller.forgetNodes(gone);
      const byId = new Map(whole.map((r) => [r.id, r]));
      for (const head of heads) {
        const row = byId.get(head.id) ?? (controller.inventory.get(head.id) ? head : undefined);
        if (row) controller.applyRemoteNode(row, seenAt(row, skew));
      }
    },
    // A NOTIFY for each node that joins: a burst of joins is read a few times.
    { burstMs: 100 },
  );
}

/** When the database saw the row's heartbeat, on this instance's clock. */
const seenAt = (row: StoredNode, skew: number) => (row.lastSeenMs === undefined ? undefined : row.lastSeenMs - skew);
