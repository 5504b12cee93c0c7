import { Type, type Static } from '@sinclair/typebox';

/** `GET /api/v1/version`: the server's build, for `ctl version` beside its own. */
export const VersionViewSchema = Type.Object({
  /** The server package's version (its package.json). */
  version: Type.String(),
  /** The Node.js it runs on, e.g. v20.20.2. */
  node: Type.String(),
});
export type VersionView = Static<typeof VersionViewSchema>;

/** What `POST /api/v1/nodes/:id/state` answers. */
export const NodeStateReplySchema = Type.Object({
  id: Type.String(),
  state: Type.String(),
  reason: Type.Optional(Type.String()),
  /** The node was in this state before the request: nothing began (a second cordon, say). */
  already: Type.Optional(Type.Boolean()),
});
export type NodeStateReply = Static<typeof NodeStateReplySchema>;
