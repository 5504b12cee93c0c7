import type { ServerResponse } from 'node:http';
import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import type { ErrorBody, Static, TSchema } from '@llmgw/shared';
import { validate, formatFailure } from '@llmgw/shared';
import { DomainError, badRequest, echo, httpStatus, toDomainError } from '../errors.js';
import { bodyParser } from './body-routes.js';

/**
 * How deep a JSON body may nest. Our deepest request is a heartbeat at 4 levels; the
 * limit is there because a parsed body is later walked recursively (validation,
 * `JSON.stringify` on its way to the store), which overflows the stack far below the
 * depth `JSON.parse` accepts.
 */
export const MAX_JSON_DEPTH = 32;

/** The depth of a parsed JSON value, walked without recursion, stopping past `limit`. */
export function jsonDepth(value: unknown, limit = MAX_JSON_DEPTH): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const [v, depth] = top;
    if (v === null || typeof v !== 'object') continue;
    const d = depth + 1;
    if (d > deepest) deepest = d;
    if (deepest > limit) return deepest;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, d]);
  }
  return deepest;
}

/** The refusal of a parsed body nested deeper than `MAX_JSON_DEPTH`; undefined for one within it. Every JSON body reader asks it. */
export function tooDeep(body: unknown): DomainError | undefined {
  return jsonDepth(body) > MAX_JSON_DEPTH ? badRequest(`nested deeper than ${MAX_JSON_DEPTH} levels`, '(body)') : undefined;
}

/**
 * Parses JSON bodies; a malformed, oversized, badly encoded or too deeply nested body is
 * a 4xx like any other bad input (see `toDomainError`), refused before any handler sees it.
 * The parser is marked with its limit (`bodyParser`), so the route is in `bodyRoutes`.
 */
export function jsonBody(limit = '1mb'): RequestHandler[] {
  return [bodyParser(express.json({ limit, type: () => true }), 'json', limit), (req, _res, next) => next(tooDeep(req.body))];
}

/**
 * The last handler of a route (`r.route(path).get(...).all(methodNotAllowed)`): any
 * other method is a 405 that lists, in `Allow`, the ones the route has.
 */
export const methodNotAllowed: RequestHandler = (req, res, next) => {
  const route = req.route as { methods?: Record<string, boolean> } | undefined;
  const methods = Object.keys(route?.methods ?? {})
    .filter((m) => m !== '_all')
    .map((m) => m.toUpperCase());
  if (methods.includes('GET')) methods.push('HEAD');
  res.setHeader('Allow', methods.join(', '));
  next(new DomainError('method_not_allowed', `${echo(req.method)} is not allowed here (allowed: ${methods.join(', ')})`, { field: 'method' }));
};

/**
 * A 200 with a JSON body, as `res.json` sends it but for the ETag: for answers to a POST,
 * which no client revalidates, so hashing each body is work for nothing.
 */
export function sendJson(res: ServerResponse, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Validates a body against a shared schema, or throws a 400 naming the field. */
export function parseBody<S extends TSchema>(schema: S, body: unknown, root = ''): Static<S> {
  const r = validate(schema, body, root);
  if (!r.ok) throw badRequest(formatFailure(r.error), r.error.field);
  return r.value;
}

/**
 * Answers any error on the admin listener in its body (`ErrorBody`: the message, its
 * code, the field at fault), with the code's status and, where the code says when to try
 * again, `Retry-After`. The code is what a client branches on (ctl's exit code): the
 * status alone cannot tell a missing node from a missing route. The one writer of the
 * admin listener's errors, for express's routes (`adminErrors`) and the lean heartbeat
 * path (api/heartbeat.ts) alike. An answer already under way can only be cut.
 */
export function writeError(res: ServerResponse, err: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const e = toDomainError(err);
  const body: ErrorBody = { error: e.message, code: e.code, ...(e.field ? { field: e.field } : {}) };
  const text = JSON.stringify(body);
  if (e.details.retryAfterS !== undefined) res.setHeader('Retry-After', String(e.details.retryAfterS));
  res.writeHead(httpStatus(e.code), { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** `writeError` as express's last error handler. */
export const adminErrors: ErrorRequestHandler = (err, _req, res, _next) => writeError(res, err);
