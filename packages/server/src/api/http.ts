import express, { type ErrorRequestHandler, type NextFunction, type Request, type Response } from 'express';
import type { Static, TSchema } from '@llmgw/shared';
import { validate, formatFailure } from '@llmgw/shared';
import { DomainError, badRequest, httpStatus, toDomainError } from '../errors.js';
import { bearerToken, secretEquals } from './tokens.js';

/** Requires `Authorization: Bearer <token>`; `what` names the credential in the 401. */
export function requireToken(token: string, what: string) {
  return (req: Request, _res: Response, next: NextFunction) => {
    const given = bearerToken(req.headers.authorization);
    if (!given) return next(new DomainError('unauthenticated', `missing ${what}: send "Authorization: Bearer <token>"`));
    if (!secretEquals(given, token)) return next(new DomainError('unauthenticated', `invalid ${what}`));
    next();
  };
}

/** Parses JSON bodies; a malformed body is a 400 like any other bad input. */
export function jsonBody(limit = '1mb') {
  return express.json({ limit, type: () => true });
}

/** Validates a body against a shared schema, or throws a 400 naming the field. */
export function parseBody<S extends TSchema>(schema: S, body: unknown, root = ''): Static<S> {
  const r = validate(schema, body, root);
  if (!r.ok) throw badRequest(formatFailure(r.error), r.error.field);
  return r.value;
}

/** Answers any error in the admin API's `{"error": "...", "field"?: "..."}` body, with the code's status. */
export const adminErrors: ErrorRequestHandler = (err, _req, res, _next) => {
  const e = toDomainError(err);
  res.status(httpStatus(e.code)).json({ error: e.message, ...(e.field ? { field: e.field } : {}) });
};
