import { Notifications } from '../store/notify.js';
import { InstanceRegistry, type InstanceInfo } from './instances.js';
import type { LeaderLease } from './lease.js';
import type { SharedLimits } from './limits.js';
import { ClusterSync, type ClusterSyncOptions } from './sync.js';

/** What ClusterSync keeps in step (its options, less what startCluster makes), and what the rest needs. */
export interface ClusterParts extends Omit<ClusterSyncOptions, 'notifications' | 'pullEveryMs' | 'overlapMs' | 'fullEveryMs'> {
  databaseUrl: string;
  lease: LeaderLease;
  /** The per-key counts shared with the others; the key ring was made with them (server.ts). */
  limits: SharedLimits;
  instanceId: string;
  adminUrl: string;
  clientUrl: string;
  info: InstanceInfo;
  /** The catalog in force now, published when it changes (a reload, or a failed one). */
  catalog: () => NonNullable<InstanceInfo['catalog']>;
}

/** What runs beside the controller when several instances share one PostgreSQL. */
export interface RunningCluster {
  registry: InstanceRegistry;
  lease: LeaderLease;
  sync: ClusterSync;
  close(): Promise<void>;
}

/**
 * Joins this instance to the others on the database, in an order that never acts on a
 * stale picture: listen for NOTIFYs and pull the heartbeats first, share the per-key
 * limits, register, and only then try for the lease. An instance that becomes leader
 * plans at once, and its first pass re-reads the replicas (the last leader may have
 * written since); one that loses the lease stops planning (its writes are fenced anyway).
 */
export async function startCluster(p: ClusterParts): Promise<RunningCluster> {
  const notifications = await Notifications.listen(p.databaseUrl, { log: p.log });
  const sync = new ClusterSync({ ...p, notifications });
  sync.start();
  await sync.pull();
  await p.limits.start();
  const registry = new InstanceRegistry({ pool: p.store.pool, log: p.log, id: p.instanceId, adminUrl: p.adminUrl, clientUrl: p.clientUrl, info: p.info });
  await registry.start();
  // Every instance's catalog result reaches the others within a second (ctl status).
  let published = JSON.stringify(p.info.catalog);
  const catalogTimer = setInterval(() => {
    const now = JSON.stringify(p.catalog());
    if (now === published) return;
    published = now;
    registry.setInfo({ catalog: p.catalog() }).catch((err: unknown) => p.log.warn({ err: (err as Error).message }, 'could not publish the catalog result'));
  }, 500);
  catalogTimer.unref();
  // A new leader plans at once; its first pass re-reads the replicas (SharedController).
  p.lease.onChange((leader) => {
    if (leader) p.controller.notify();
  });
  await p.lease.start();
  return {
    registry,
    lease: p.lease,
    sync,
    async close() {
      clearInterval(catalogTimer);
      sync.stop();
      // The lease first, so a successor can take over while the rest shuts down.
      await p.lease.stop();
      await registry.stop();
      await p.limits.stop();
      await notifications.close();
    },
  };
}
