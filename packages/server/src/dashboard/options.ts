import type { NodeAdminState, Priority } from '@llmgw/shared';
import type { CatalogStatusSource } from '../catalog/watch.js';

/** What the dashboard reads beyond the controller and the keys, given by the server. */
export interface DashboardOptions {
  /** The server serves its admin listener over plain HTTP: every page carries the warning. */
  insecureHttp?: boolean;
  catalogStatus?: CatalogStatusSource;
  /** Told of a node's admin state change made from the dashboard (the event log). */
  onNodeState?: (who: string, id: string, state: NodeAdminState) => void;
  /** Requests of a model waiting in the gateway, per priority band (`Gateway.queuedFor`); absent: none shown. */
  queued?: (model: string) => Record<Priority, number>;
  /** The LoRA adapters the gateway takes a replica to hold loaded (`Gateway.adapters`); absent: none shown as loaded. */
  adapters?: (replicaId: string) => string[];
}
