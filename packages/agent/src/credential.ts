import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { HTTPError } from 'got';
import type { Logger } from 'pino';
import { JoinReplySchema, formatFailure, validate, writePrivateFile } from '@llmgw/shared';
import { ServerPool } from './servers.js';
import { serverClient } from './trust.js';

/** How the agent authenticates its heartbeats and long-polls (see `NodeCredential`). */
export interface AgentAuth {
  /** The `Authorization` header to send; may join first. */
  header(): Promise<string>;
  /** The server answered 401 to `header`: that credential is no longer valid. */
  rejected(header: string): void;
}

/** The server refused to let this machine join: retrying cannot help, the operator must act. */
export class JoinRefused extends Error {}

export interface CredentialOptions {
  /** The server's address (or several, comma-separated), or the pool the agent shares. */
  server: string | ServerPool;
  joinToken: string;
  /** The CA the server's certificate must chain to (from the join token's pin or --ca). */
  ca?: string;
  nodeId: string;
  stateDir: string;
  log: Logger;
  /** Called with the one line that says why a join was refused; main exits there. */
  onRefused?: (line: string) => void;
}

/** `<state-dir>/node-credential.json`, mode 0600: this node's own secret. */
export function credentialFile(stateDir: string): string {
  return path.join(stateDir, 'node-credential.json');
}

interface Saved {
  node_id: string;
  credential: string;
}

/**
 * `<state-dir>/node-join.json`, mode 0600: the join under way, written before it is sent
 * and removed once its credential is saved, so a retry after a lost reply (or a restart
 * in between) is the same join to the server.
 */
export function joinFile(stateDir: string): string {
  return path.join(stateDir, 'node-join.json');
}

interface PendingJoin {
  node_id: string;
  join_id: string;
}

/**
 * This node's credential (README.md, "Joining: the node credential"). The join token is sent once, to `/agent/v1/join`,
 * and traded for a credential bound to the node id, kept in the state directory (0600)
 * so a restarted agent does not join again; every heartbeat and long-poll carries the
 * credential. A credential saved for another node id is not used (the agent joins under
 * its new id). When the server no longer knows the credential (the node was deleted with
 * `ctl nodes delete`), it is forgotten and the next call joins again.
 *
 * A join the server refuses (a 4xx but 429: the id is taken, the join token is wrong) is final:
 * `onRefused` gets one line and the error is thrown, never retried in a loop. An
 * unreachable server is an ordinary error, retried with the heartbeat's backoff.
 */
export class NodeCredential implements AgentAuth {
  private secret?: string;
  private joining?: Promise<string>;
  private readonly servers: ServerPool;

  constructor(private readonly o: CredentialOptions) {
    this.secret = this.load();
    this.servers = ServerPool.of(o.server, o.log);
  }

  async header(): Promise<string> {
    return `Bearer ${await this.current()}`;
  }

  rejected(header: string): void {
    if (!this.secret || header !== `Bearer ${this.secret}`) return;
    this.o.log.warn(
      { node: this.o.nodeId },
      `the server no longer accepts this node's credential (was it deleted with ctl nodes delete ${this.o.nodeId}?): joining again with the join token`,
    );
    this.secret = undefined;
    fs.rmSync(credentialFile(this.o.stateDir), { force: true });
  }

  private current(): Promise<string> {
    if (this.secret) return Promise.resolve(this.secret);
    // Concurrent callers (heartbeat and long-poll) share one join: a second would be refused.
    this.joining ??= this.join().finally(() => (this.joining = undefined));
    return this.joining;
  }

  private load(): string | undefined {
    try {
      const saved = JSON.parse(fs.readFileSync(credentialFile(this.o.stateDir), 'utf8')) as Partial<Saved>;
      if (saved.node_id === this.o.nodeId && typeof saved.credential === 'string' && saved.credential) return saved.credential;
    } catch {
      /* none yet: join */
    }
    return undefined;
  }

  private async join(): Promise<string> {
    const { nodeId } = this.o;
    const client = serverClient(this.o.ca);
    let server = this.servers.current;
    let body: unknown;
    try {
      // The same node id and join id is the same join to every instance: a retry whose
      // first reply was lost gets a credential in place of the one it never received.
      const joinId = this.pendingJoinId();
      body = await this.servers.request(async (url, signal) => {
        server = url;
        return client
          .post(`${url}/agent/v1/join`, {
            json: { node_id: nodeId, join_id: joinId },
            headers: { authorization: `Bearer ${this.o.joinToken}` },
            timeout: { connect: 5_000, request: 10_000 },
            retry: { limit: 0 },
            signal,
          })
          .json();
      });
    } catch (err) {
      const line = refusal(err, server, nodeId);
      if (!line) throw err;
      this.o.onRefused?.(line);
      throw new JoinRefused(line);
    }
    const r = validate(JoinReplySchema, body);
    if (!r.ok || r.value.node_id !== nodeId)
      throw new Error(
        `the server at ${server} answered the join with a reply that is not one: ${r.ok ? `node_id ${r.value.node_id}` : formatFailure(r.error)}`,
      );
    this.save({ node_id: nodeId, credential: r.value.credential });
    fs.rmSync(joinFile(this.o.stateDir), { force: true });
    this.secret = r.value.credential;
    this.o.log.info(
      { server, node: nodeId, state: r.value.state },
      r.value.state === 'pending-approval'
        ? `joined the server; waiting for approval (ctl nodes approve ${nodeId})`
        : 'joined the server with its own credential',
    );
    return r.value.credential;
  }

  /** The join id of the join under way for this node id, or a new one, saved before it is sent. */
  private pendingJoinId(): string {
    try {
      const p = JSON.parse(fs.readFileSync(joinFile(this.o.stateDir), 'utf8')) as Partial<PendingJoin>;
      if (p.node_id === this.o.nodeId && typeof p.join_id === 'string' && /^[A-Za-z0-9_-]{16,128}$/.test(p.join_id)) return p.join_id;
    } catch {
      /* none under way */
    }
    const pending: PendingJoin = { node_id: this.o.nodeId, join_id: randomBytes(24).toString('base64url') };
    fs.mkdirSync(this.o.stateDir, { recursive: true, mode: 0o700 });
    writePrivateFile(joinFile(this.o.stateDir), `${JSON.stringify(pending)}\n`);
    return pending.join_id;
  }

  /** Written whole or not at all (a temporary file renamed), never readable by others. */
  private save(saved: Saved): void {
    fs.mkdirSync(this.o.stateDir, { recursive: true, mode: 0o700 });
    writePrivateFile(credentialFile(this.o.stateDir), `${JSON.stringify(saved)}\n`);
  }
}

/** The one line for a join the server refused, or undefined for a failure worth retrying. */
function refusal(err: unknown, server: string, nodeId: string): string | undefined {
  if (!(err instanceof HTTPError)) return undefined;
  const status = err.response.statusCode;
  // 429: the server's --join-rate is used up for now, which the next beat may find refilled.
  if (status < 400 || status >= 500 || status === 429) return undefined;
  let detail: string;
  try {
    detail = (JSON.parse(String(err.response.body)) as { error?: string }).error ?? '';
  } catch {
    detail = String(err.response.body).slice(0, 200);
  }
  if (status === 401) return `the server at ${server} rejected the join token (${detail}): set LLMGW_JOIN_TOKEN to the server's current join token`;
  return `the server at ${server} refused to let this machine join as node ${nodeId} (${status}): ${detail}`;
}
