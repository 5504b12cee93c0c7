import type { NodeAdminState } from '@llmgw/shared';
import type { Logger } from 'pino';
import type { Controller } from '../controller/controller.js';
import type { Store } from '../store/store.js';
import { adminAudit, nodeStateEvent, recordAdmin } from './admin-events.js';
import type { Decision } from '../domain.js';
import { decisionEvent, rolloutEvent } from './decisions.js';
import { credentialEvent, type CredentialEvent } from './credentials.js';
import { downloadEvent, reportRefusedEvent } from './downloads.js';
import { EventLog } from './event-log.js';
import { eventsApi } from './events-api.js';

export { EventLog, type CredentialEvent, type Decision };

/**
 * The fleet's events, wired to their sources: the controller's decisions (its
 * `decided` event, once per applied plan and per failed replica report), model files
 * that start, finish or fail to come to a node (its `downloads` event), the admin API's
 * writes (`adminAudit`, a middleware after the token check, through which their routes'
 * audits record), the dashboard's node buttons (`onNodeState`), a node credential heard
 * from two places (`onCredential`, from the agent API), and served as
 * `GET /api/v1/events` (`api`).
 */
export async function fleetEvents(store: Store, controller: Controller, log: Logger) {
  const events = await EventLog.load(store, { log });
  const nodesOf = (id: string) =>
    controller
      .listReplicas()
      .find((r) => r.id === id)
      ?.shards.map((s) => s.nodeId) ?? [];
  controller.events.on('decided', (ds) => {
    for (const d of ds) events.record(decisionEvent(d, nodesOf));
  });
  controller.events.on('rollouts', (rs) => {
    for (const r of rs) events.record(rolloutEvent(r));
  });
  controller.events.on('downloads', (ds) => {
    for (const d of ds) events.record(downloadEvent(d));
  });
  controller.events.on('reportRefused', (r) => events.record(reportRefusedEvent(r)));
  const admin = (id: string) => controller.inventory.get(id)?.admin;
  return {
    events,
    adminAudit: adminAudit(events, admin),
    api: eventsApi(events, (m) => controller.catalogView.resolve(m)?.name),
    onNodeState: (who: string, id: string, state: NodeAdminState) => recordAdmin(events, who, nodeStateEvent(id, state, admin(id))),
    onCredential: (e: CredentialEvent) => events.record(credentialEvent(e)),
  };
}
