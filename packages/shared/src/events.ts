import { Type, type Static } from '@sinclair/typebox';

/**
 * Events of the fleet (`GET /api/v1/events`, `ctl events`), like `kubectl get events`:
 * what an operator did (who, what, when) and what the reconciler decided (placed,
 * replaced, drained, failed, scaled), each with a reason code and a sentence.
 */

/** `Warning` for what needs a look (a failure, a lost node, a blocked drain); `Normal` otherwise. */
export const EVENT_TYPES = ['Normal', 'Warning'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Who made the event: an operator's request, or a reconcile pass (or a shard report). */
export const EVENT_SOURCES = ['admin', 'reconciler'] as const;
export type EventSource = (typeof EVENT_SOURCES)[number];

/**
 * The reasons of events about who speaks for a node, a closed set (the server records
 * only these): `credential-conflict`, one node credential heard from two addresses or
 * hostnames at once; `credential-refused`, such a heartbeat refused under
 * `--bind-credentials`.
 */
export const CREDENTIAL_EVENT_REASONS = ['credential-conflict', 'credential-refused'] as const;
export type CredentialEventReason = (typeof CREDENTIAL_EVENT_REASONS)[number];

export const EventViewSchema = Type.Object({
  /** Increasing: a watcher asks for the events after the last id it saw. */
  id: Type.Integer(),
  /** ISO 8601. */
  time: Type.String(),
  type: Type.Union(EVENT_TYPES.map((t) => Type.Literal(t))),
  source: Type.Union(EVENT_SOURCES.map((s) => Type.Literal(s))),
  /** A code: `cordon`, `token-create`, … for admin actions; the reconciler's action codes (`scale-up`, `drain-replacement`, `failed`, …). */
  reason: Type.String(),
  /** What it is about, as `kind/name`: `node/gpu-1`, `replica/r-1a2b3c4d`, `token/tok-…`, `key/key-…`. */
  object: Type.String(),
  /** The nodes and model it concerns, for `--node` and `--model`. */
  nodes: Type.Array(Type.String()),
  model: Type.Optional(Type.String()),
  /** The name of the token that made an admin action (`admin token` for the bootstrap one). */
  who: Type.Optional(Type.String()),
  message: Type.String(),
});
export type EventView = Static<typeof EventViewSchema>;

export const EventListSchema = Type.Object({
  events: Type.Array(EventViewSchema),
  /** Pass as `since` to get only what came after this answer (with `wait_s`, a watch). */
  cursor: Type.Integer(),
});
export type EventList = Static<typeof EventListSchema>;
