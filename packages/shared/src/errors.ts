import { Type, type Static } from '@sinclair/typebox';
import { ERROR_CODES } from './names.js';

/**
 * Why the gateway answered 429, as a closed set: a key's request rate, token quota or
 * concurrency limit, or flow control (a request waited its TTL, or its band's queue was
 * full). The label of `llmgw_rate_limited_total`.
 */
export const LIMIT_REASONS = ['rpm', 'tpm', 'concurrency', 'queue_timeout', 'queue_full'] as const;
export type LimitReason = (typeof LIMIT_REASONS)[number];

/**
 * The error body of the admin listener (admin API, agent API, the dashboard's JSON
 * answers): `error` is the line to show, `code` what went wrong for a program to branch
 * on, `field` the input at fault when there is one.
 */
export const ErrorBodySchema = Type.Object({
  error: Type.String(),
  code: Type.Union(ERROR_CODES.map((c) => Type.Literal(c))),
  field: Type.Optional(Type.String()),
});
export type ErrorBody = Static<typeof ErrorBodySchema>;

/** OpenAI's error body, which the official SDKs turn into typed exceptions. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}
