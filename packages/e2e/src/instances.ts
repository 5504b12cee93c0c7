import { freePort, startServer, tmpDir, type ServerProc } from './harness.js';

/**
 * Two server instances on one PostgreSQL, for the journeys of several servers
 * (high-availability.test.ts) and the failover figures of issue 28 (failover-runs.test.ts).
 */

/** Two replicas that cannot share a node (20 GB each on 32 GB nodes): one engine per agent. */
export const PAIR_CATALOG = `models:
  - name: echo
    source: test
    scaling: { min: 2, max: 2 }
    profiles:
      - { name: cpu, engine: command, min_memory_gb: 20, command: [llmgw-test-engine, --host, "{host}", --port, "{port}", --model, "{model}", --api-key, "{api_key}"] }
`;

/** Liveness and reconcile fast enough that a kill shows within seconds. */
export const FAST_LIVENESS = ['--not-ready-after', '3', '--lost-after', '6', '--reconcile-interval', '1'];

export interface Instance extends ServerProc {
  id: string;
  /** Starts the same instance again (its ports and data dir), after a kill. */
  start: () => Promise<Instance>;
}

/** An instance on `db` with fixed ports and data dir, so that `start` brings the same one back. */
export async function instance(db: string, id: string, catalog: string): Promise<Instance> {
  const [adminPort, clientPort] = [await freePort(), await freePort()];
  const dataDir = tmpDir(`llmgw-${id}-`);
  const start = async (): Promise<Instance> => {
    const s = await startServer({
      dataDir,
      catalog,
      adminAddr: `127.0.0.1:${adminPort}`,
      // HTTPS on both: the CA is shared through the database, so one join token (its pin) holds for both.
      args: ['--client-addr', `127.0.0.1:${clientPort}`, '--database-url', db, '--instance-id', id, ...FAST_LIVENESS],
    });
    return { ...s, id, start };
  };
  return start();
}
