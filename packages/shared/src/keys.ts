import { Type, type Static } from '@sinclair/typebox';
import { PRIORITIES } from './names.js';

/** Client API keys (admin API `/api/v1/keys`) and usage (`/api/v1/usage`). */

const PrioritySchema = Type.Union(PRIORITIES.map((p) => Type.Literal(p)));

export const KeyCreateRequestSchema = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 200 }),
  /** Models (names or aliases) the key may use; absent or empty = all. */
  models: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 1000 })),
  /** Requests per minute; absent = unlimited. */
  rpm: Type.Optional(Type.Integer({ minimum: 1, maximum: 1e9 })),
  /** Requests in flight at once; absent = unlimited. */
  max_concurrent: Type.Optional(Type.Integer({ minimum: 1, maximum: 1e6 })),
  /** Prompt + completion tokens per minute, from the engines' reported usage (sliding window); absent = unlimited. */
  tpm: Type.Optional(Type.Integer({ minimum: 1, maximum: 1e12 })),
  /** Priority band under saturation; absent = `standard`. */
  priority: Type.Optional(PrioritySchema),
  /** ISO 8601 time after which the key stops working. */
  expires_at: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
});
export type KeyCreateRequest = Static<typeof KeyCreateRequestSchema>;

/**
 * `PATCH /keys/:id` (`ctl keys update`): the limits and band to change; a field left out
 * stays as it is, and `null` removes a limit (or the band, back to `standard`). An
 * empty `models` list lets the key use every model.
 */
export const KeyUpdateRequestSchema = Type.Object(
  {
    models: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 1000 })),
    rpm: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1e9 }), Type.Null()])),
    max_concurrent: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1e6 }), Type.Null()])),
    tpm: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1e12 }), Type.Null()])),
    priority: Type.Optional(Type.Union([PrioritySchema, Type.Null()])),
  },
  { additionalProperties: false },
);
export type KeyUpdateRequest = Static<typeof KeyUpdateRequestSchema>;

export const KeyViewSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  /** The first characters of the secret, to tell keys apart; the secret itself is never stored. */
  prefix: Type.String(),
  models: Type.Array(Type.String()),
  rpm: Type.Optional(Type.Integer()),
  max_concurrent: Type.Optional(Type.Integer()),
  tpm: Type.Optional(Type.Integer()),
  priority: Type.Optional(PrioritySchema),
  expires_at: Type.Optional(Type.String()),
  created_at: Type.String(),
  revoked_at: Type.Optional(Type.String()),
});
export type KeyView = Static<typeof KeyViewSchema>;

/** `DELETE /keys/:id`'s reply: the key as it now is; `already` when it was revoked before. */
export type KeyRevokeReply = KeyView & { already?: true };

export const KeyCreatedSchema = Type.Object({
  key: KeyViewSchema,
  /** Shown once, at creation. */
  secret: Type.String(),
});
export type KeyCreated = Static<typeof KeyCreatedSchema>;

export const UsageRowSchema = Type.Object({
  key_id: Type.String(),
  key_name: Type.String(),
  model: Type.String(),
  requests: Type.Integer(),
  errors: Type.Integer(),
  /** Requests the client left before the end; their streamed tokens are counted. */
  cancelled: Type.Integer(),
  prompt_tokens: Type.Integer(),
  completion_tokens: Type.Integer(),
});
export type UsageRow = Static<typeof UsageRowSchema>;
