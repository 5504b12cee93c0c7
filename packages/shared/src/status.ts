import { Type, type Static } from '@sinclair/typebox';

/** One instance's catalog as it last loaded it: instances that disagree show it here. */
export const StatusCatalogSchema = Type.Object({
  /** The digest of the catalog in force on that instance (the same on every instance that loaded the same file). */
  digest: Type.String(),
  /** How many models that catalog has. */
  models: Type.Integer({ minimum: 0 }),
  /** Its last reload's failure, when that reload failed (the catalog in force is then the previous one). */
  error: Type.Optional(Type.String()),
});
export type StatusCatalog = Static<typeof StatusCatalogSchema>;

/** One server instance among those on the store. */
export const StatusInstanceSchema = Type.Object({
  /** The instance's id (by default `hostname-pid-random4`; SQLite: the one instance's). */
  id: Type.String(),
  /** Where its admin API listens, as it published it. */
  admin_url: Type.Optional(Type.String()),
  /** Where its client (OpenAI-compatible) gateway listens, as it published it. */
  client_url: Type.Optional(Type.String()),
  /** When it started (ISO 8601; PostgreSQL: the database's clock). */
  started: Type.String(),
  /** Whole seconds since it last refreshed its row, by the database's clock (0 for the answering SQLite instance). */
  last_seen_s: Type.Integer({ minimum: 0 }),
  /** Whether it holds the leader lease (the same instance as `leader.instance`). */
  leader: Type.Boolean(),
  /** Whether it is the instance that answered this request. */
  self: Type.Boolean(),
  /** Its server version, as it published it. */
  version: Type.Optional(Type.String()),
  /** Its catalog, as it last loaded it; absent before its first load or without --catalog. */
  catalog: Type.Optional(StatusCatalogSchema),
});
export type StatusInstance = Static<typeof StatusInstanceSchema>;

/** `GET /api/v1/status`: the store, the instances on it and the leader among them, for `ctl status`. */
export const StatusViewSchema = Type.Object({
  /** The store the instances share: SQLite is always one instance, its own leader. */
  store: Type.Union([Type.Literal('sqlite'), Type.Literal('postgres')]),
  /** The id of the instance that answered. */
  instance: Type.String(),
  /** Who runs the reconciler and writes assignments. */
  leader: Type.Object({
    /** The lease holder's instance id; absent when nobody holds an unexpired lease (an election is due). */
    instance: Type.Optional(Type.String()),
    /** The lease's term number: one more at every change of leader, never reused (0 on SQLite). */
    epoch: Type.Integer({ minimum: 0 }),
    /** When the holder's term began (ISO 8601; PostgreSQL: the database's clock); absent with `instance`. */
    since: Type.Optional(Type.String()),
  }),
  /** The instances seen lately, oldest first. */
  instances: Type.Array(StatusInstanceSchema),
});
export type StatusView = Static<typeof StatusViewSchema>;
