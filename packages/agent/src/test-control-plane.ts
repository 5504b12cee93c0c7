/**
 * A small control plane of several instances for the agent's failover tests (imported by
 * tests only): real HTTPS servers on 127.0.0.1 with the fixture certificate (one CA for
 * all, as a real cluster has), speaking the agent API's few endpoints over one shared
 * state, as instances on one database do. `kill()` is what SIGKILL does to an instance:
 * its connections break at once and its port refuses from then on; `freeze()` is SIGSTOP
 * (or a host gone from the network): connections stay open and nothing answers.
 */
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AssignmentsReply, ShardAssignment } from '@llmgw/shared';

const tls = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test/fixtures/tls');
export const TEST_CA = fs.readFileSync(path.join(tls, 'ca.pem'), 'utf8');
const cert = { cert: fs.readFileSync(path.join(tls, 'server.pem')), key: fs.readFileSync(path.join(tls, 'server-key.pem')) };

/** What every instance reads and writes: the node's assignments, its credential, the served files. */
export class ClusterState {
  version = 1;
  assignments: ShardAssignment[] = [];
  readonly credential = 'llmgw-node-test-credential-0001';
  readonly files = new Map<string, Buffer>();
  private readonly waiting = new Set<() => void>();

  /** A change of assignments: every held long-poll, on any instance, answers. */
  publish(assignments: ShardAssignment[]): void {
    this.version++;
    this.assignments = assignments;
    for (const w of [...this.waiting]) w();
  }

  reply(nodeId: string): AssignmentsReply {
    return { node_id: nodeId, version: this.version, assignments: this.assignments };
  }

  wait(onChange: () => void): () => void {
    this.waiting.add(onChange);
    return () => this.waiting.delete(onChange);
  }
}

/** One request an instance got. */
export interface Hit {
  kind: 'join' | 'heartbeat' | 'poll' | 'file' | 'cacerts';
  at: number;
  auth: string;
}

export interface Instance {
  url: string;
  hits: Hit[];
  /** Long-polls held open right now. */
  held(): number;
  /** As SIGKILL: every connection cut, the port closed. */
  kill(): Promise<void>;
  /** As SIGSTOP: nothing is answered from now on, no connection is closed. */
  freeze(): void;
  /** Listens again on the same port (a restarted instance). */
  restart(): Promise<void>;
}

/** An instance of the control plane over `state`, on `port` (0: any free one). */
export async function startInstance(state: ClusterState, port = 0): Promise<Instance> {
  const hits: Hit[] = [];
  let held = 0;
  let frozen = false;
  const srv = https.createServer(cert, (req, res) => {
    if (frozen) return;
    const url = new URL(req.url ?? '/', 'https://x');
    const auth = req.headers.authorization ?? '';
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const record = (kind: Hit['kind']) => hits.push({ kind, at: Date.now(), auth });
    if (url.pathname === '/cacerts') {
      record('cacerts');
      return void res.end(TEST_CA);
    }
    if (url.pathname === '/agent/v1/join') {
      record('join');
      return void req.resume().on('end', () => json(200, { node_id: 'n1', credential: state.credential, state: 'ready' }));
    }
    // Everything else takes the node credential, which every instance knows.
    if (auth !== `Bearer ${state.credential}`) return void json(401, { error: 'invalid node credential' });
    if (url.pathname === '/agent/v1/heartbeat') {
      record('heartbeat');
      return void req.resume().on('end', () => json(200, { node_id: 'n1' }));
    }
    const poll = /^\/agent\/v1\/nodes\/([^/]+)\/assignments$/.exec(url.pathname);
    if (poll) {
      record('poll');
      const nodeId = decodeURIComponent(poll[1]!);
      if (Number(url.searchParams.get('after')) !== state.version) return void json(200, state.reply(nodeId));
      held++;
      const done = () => {
        held--;
        stop();
        clearTimeout(timer);
      };
      const stop = state.wait(() => {
        if (frozen) return;
        done();
        json(200, state.reply(nodeId));
      });
      const timer = setTimeout(
        () => {
          if (frozen) return;
          done();
          json(200, state.reply(nodeId));
        },
        Number(url.searchParams.get('wait_ms') ?? 25_000),
      );
      res.on('close', () => {
        if (!res.writableEnded) done();
      });
      return;
    }
    const file = /^\/agent\/v1\/files\/([^/]+)$/.exec(url.pathname);
    const body = file ? state.files.get(decodeURIComponent(file[1]!)) : undefined;
    if (body) {
      record('file');
      const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
      const start = m ? Number(m[1]) : 0;
      res.writeHead(m ? 206 : 200, {
        'content-length': body.length - start,
        ...(m ? { 'content-range': `bytes ${start}-${body.length - 1}/${body.length}` } : {}),
      });
      return void res.end(body.subarray(start));
    }
    json(404, { error: 'not found' });
  });
  const listen = (p: number) => new Promise<void>((r) => srv.listen(p, '127.0.0.1', r));
  await listen(port);
  const bound = (srv.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${bound}`,
    hits,
    held: () => held,
    kill: async () => {
      const closed = new Promise<void>((r) => srv.close(() => r()));
      srv.closeAllConnections();
      await closed;
    },
    restart: () => listen(bound),
    freeze: () => {
      frozen = true;
    },
  };
}
