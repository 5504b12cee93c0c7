/**
 * Where each node credential is heard from, to catch one used from two places at once
 * (issue 27, finding 8: a stolen credential replayed from another machine took the
 * node's traffic while the real agent kept heartbeating, and each side's report
 * overwrote the other's unnoticed). In memory, per instance: each instance judges the
 * heartbeats it receives.
 */

/** Where one heartbeat came from: the connection's peer and what the report says. */
export interface Sighting {
  /** The TCP peer (`req.socket.remoteAddress`): behind a proxy, the proxy. */
  peer: string;
  mgmtAddr: string;
  hostname: string;
}

/** Two places one credential was heard from, the one it moved away from and the one it came back from. */
export interface CredentialConflict {
  nodeId: string;
  /** The place heard last before this heartbeat. */
  other: Sighting;
  /** The place this heartbeat came from, heard before `other` and back now. */
  back: Sighting;
  /** Why, in words, for the event and `ctl nodes`. */
  reason: string;
}

/** What one heartbeat's sighting means. */
export type SightingVerdict =
  | { kind: 'ok' }
  /** A second place while the first is still live: recorded as suspect (and, with binding, refused). */
  | { kind: 'conflict'; conflict: CredentialConflict }
  /** `--bind-credentials`: another place than the live one, refused before anything changes. */
  | { kind: 'refused'; message: string };

export interface SightingsOptions {
  /** How long a place stays live after its last heartbeat: the server's `--not-ready-after`. */
  liveMs: number;
  /** `--bind-credentials`: a heartbeat from another place than a live one is refused. */
  bind: boolean;
}

const key = (s: Sighting) => `${s.peer}|${s.mgmtAddr}|${s.hostname}`;
const shown = (s: Sighting) => `${s.peer} (mgmt_addr ${s.mgmtAddr}, hostname ${s.hostname})`;

interface Track {
  /** The place heard last. */
  current: Sighting;
  /** Every place heard, with when it was last heard. */
  lastMs: Map<string, { s: Sighting; atMs: number }>;
}

/**
 * One credential's places. A node that moves (a new DHCP lease, a re-imaged machine
 * keeping its state directory) goes from A to B once and is never heard from A again: no
 * conflict. One credential used from two machines alternates, A B A B: the first return
 * to a place left while it was still live is the conflict, within two heartbeats of the
 * second machine starting. With `bind`, B is refused at once while A is live, so a node
 * that really moves waits `liveMs` of silence first.
 */
export class CredentialSightings {
  private readonly tracks = new Map<string, Track>();

  constructor(private readonly opts: SightingsOptions) {}

  /** Judges a heartbeat of `nodeId` from `s` at `nowMs`; records it unless refused. */
  seen(nodeId: string, s: Sighting, nowMs: number): SightingVerdict {
    const t = this.tracks.get(nodeId);
    if (!t) {
      this.tracks.set(nodeId, { current: s, lastMs: new Map([[key(s), { s, atMs: nowMs }]]) });
      return { kind: 'ok' };
    }
    const k = key(s);
    const cur = key(t.current);
    const live = (atMs: number | undefined) => atMs !== undefined && nowMs - atMs < this.opts.liveMs;
    if (k !== cur && this.opts.bind && live(t.lastMs.get(cur)?.atMs)) {
      return {
        kind: 'refused',
        // The other place is not named: whoever holds a copy of the credential learns nothing.
        message: `this node credential is in use from another address or hostname, heard within the last ${Math.round(this.opts.liveMs / 1000)} s; this server binds a credential to one place (--bind-credentials): a node that moved is taken once the old place has been silent that long (ctl nodes shows the node suspect)`,
      };
    }
    let verdict: SightingVerdict = { kind: 'ok' };
    const before = t.lastMs.get(k);
    // Back to a place this credential left while that place was still live: two at once.
    if (k !== cur && before !== undefined && live(before.atMs) && live(t.lastMs.get(cur)?.atMs)) {
      verdict = {
        kind: 'conflict',
        conflict: {
          nodeId,
          other: t.current,
          back: s,
          reason: `node credential of ${nodeId} heard from ${shown(t.current)} and ${shown(s)} at once: a copy of it is in use on another machine (ctl nodes delete ${nodeId} revokes it; the agent joins again)`,
        },
      };
    }
    t.current = s;
    t.lastMs.set(k, { s, atMs: nowMs });
    // Places silent past the window can never conflict again: keep the map small.
    for (const [pk, v] of t.lastMs) if (!live(v.atMs) && pk !== k) t.lastMs.delete(pk);
    return verdict;
  }

  /** Forgets a node (deleted: its credential is gone). */
  forget(nodeId: string): void {
    this.tracks.delete(nodeId);
  }
}
