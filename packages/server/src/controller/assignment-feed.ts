import { EventEmitter } from 'node:events';
import type { AssignmentsReply, ShardAssignment } from '@llmgw/shared';

/**
 * Each node's assignments with a version, and the long-poll that waits for a new one.
 * Versions start at the boot time so an agent's version from before a restart (or from
 * another server instance) never matches by chance: it gets the current assignments at
 * once, and an agent that moves to another instance simply re-reads them.
 */
export class AssignmentFeed {
  private readonly json = new Map<string, string>();
  private readonly versions = new Map<string, number>();
  /** One event per node id, emitted when its assignments change; every long-poll of the node listens. */
  private readonly changed = new EventEmitter<Record<string, []>>().setMaxListeners(0);

  constructor(
    private readonly of: (nodeId: string) => ShardAssignment[],
    private readonly base: number,
  ) {}

  /** The node's assignments now, with their version. */
  reply(nodeId: string): AssignmentsReply {
    return { node_id: nodeId, version: this.versions.get(nodeId) ?? this.base, assignments: this.of(nodeId) };
  }

  /** Resolves with the node's assignments once their version differs from `after`, or at the timeout. */
  wait(nodeId: string, after: number, timeoutMs: number, signal?: AbortSignal): Promise<AssignmentsReply> {
    if ((this.versions.get(nodeId) ?? this.base) !== after) return Promise.resolve(this.reply(nodeId));
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.changed.off(nodeId, done);
        signal?.removeEventListener('abort', done);
        resolve(this.reply(nodeId));
      };
      const timer = setTimeout(done, timeoutMs);
      this.changed.on(nodeId, done);
      signal?.addEventListener('abort', done);
    });
  }

  /** Bumps the version of every node whose assignments changed, and wakes its long-poll. */
  refresh(nodeIds: readonly string[], assignmentsOf: (nodeId: string) => ShardAssignment[]): void {
    for (const id of nodeIds) {
      const json = JSON.stringify(assignmentsOf(id));
      if (this.json.get(id) === json) continue;
      this.json.set(id, json);
      this.versions.set(id, (this.versions.get(id) ?? this.base) + 1);
      this.changed.emit(id);
    }
  }
}
