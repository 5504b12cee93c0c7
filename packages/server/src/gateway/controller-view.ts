import type { Controller } from '../controller/controller.js';

/**
 * All the gateway reads from the controller: the catalog, the routes (ready replicas)
 * per model, the replicas, the nodes not heard from and last placement attempts (to explain a 503 and to follow a
 * cold start), `notify` (to start a replica now), the `replicas` event (to prune) and
 * `engineFailed` (a request failed: an engine the server's probes alone vouch for is ejected).
 * Named so that a change to the controller shows what the gateway depends on, and so
 * that tests can stand in for it.
 */
export type GatewayController = Pick<
  Controller,
  'catalogView' | 'models' | 'startedAtMs' | 'routes' | 'listReplicas' | 'unheard' | 'lastAttempt' | 'notify' | 'events' | 'engineFailed'
>;
