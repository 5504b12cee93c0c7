import { isIP } from 'node:net';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { Static, TSchema } from '@sinclair/typebox';

/** What went wrong with an input, naming the field at fault (`report.gpus[0].index`). */
export interface ValidationFailure {
  field: string;
  message: string;
  /** The allowed values, when the field must be one of a list (for a "did you mean"). */
  options?: string[];
}

export type Validated<T> = { ok: true; value: T } | { ok: false; error: ValidationFailure };

const ajv = new Ajv({ allErrors: false, strict: false, verbose: true });
// A second instance for `validateAll`: allErrors changes the compiled code, so one
// instance cannot serve both (the wire stays on the cheaper first-error code).
const ajvAll = new Ajv({ allErrors: true, strict: false, verbose: true });

/** An RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens (IPv4 is one too). */
const HOST_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** Format `host`: an IP address (Node's own parser, so IPv6 is exactly IPv6) or a host name. */
export function isHost(s: string): boolean {
  // No IPv6 zone (fe80::1%eth0): it names an interface of the agent's machine, not the server's.
  return s.length <= 253 && ((isIP(s) !== 0 && !s.includes('%')) || HOST_NAME.test(s));
}
ajv.addFormat('host', { type: 'string', validate: isHost });
ajvAll.addFormat('host', { type: 'string', validate: isHost });
const compiled = new WeakMap<TSchema, ValidateFunction>();
const compiledAll = new WeakMap<TSchema, ValidateFunction>();

/** `schema` compiled by `engine`, once: later calls cost a WeakMap lookup. */
function compiledBy(engine: Ajv, cache: WeakMap<TSchema, ValidateFunction>, schema: TSchema): ValidateFunction {
  let fn = cache.get(schema);
  if (!fn) {
    fn = engine.compile(schema);
    cache.set(schema, fn);
  }
  return fn;
}

/** `/report/gpus/0/index` → `report.gpus[0].index`. */
export function fieldPath(pointer: string, root = ''): string {
  let out = root;
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(part)) out += `[${part}]`;
    else out += out ? `.${part}` : part;
  }
  return out || '(body)';
}

function describe(e: ErrorObject, root: string): ValidationFailure {
  let field = fieldPath(e.instancePath, root);
  let message: string;
  switch (e.keyword) {
    case 'required': {
      const missing = String((e.params as { missingProperty: string }).missingProperty);
      field = field === '(body)' ? missing : `${field}.${missing}`;
      message = 'is required';
      break;
    }
    case 'additionalProperties': {
      const extra = String((e.params as { additionalProperty: string }).additionalProperty);
      field = field === '(body)' ? extra : `${field}.${extra}`;
      message = 'is not a known field';
      break;
    }
    case 'anyOf':
    case 'oneOf':
    case 'const': {
      const options = unionLiterals(e.parentSchema);
      message = options ? `must be one of ${options.join(', ')}` : 'has an invalid value';
      if (options) return { field, message, options };
      break;
    }
    case 'pattern':
    case 'format': {
      // A schema may say in words what its pattern or format means (`failMessage`, which
      // ajv ignores as an unknown keyword); a regular expression tells an operator nothing.
      const words = (e.parentSchema as { failMessage?: unknown } | undefined)?.failMessage;
      message = typeof words === 'string' ? words : (e.message ?? 'is invalid');
      break;
    }
    default:
      message = e.message ?? 'is invalid';
  }
  return { field, message };
}

function unionLiterals(schema: unknown): string[] | undefined {
  const anyOf = (schema as { anyOf?: { const?: unknown }[] } | undefined)?.anyOf;
  if (!anyOf || !anyOf.every((s) => typeof s.const === 'string')) return undefined;
  return anyOf.map((s) => String(s.const));
}

/**
 * Validates untrusted input against a shared schema. The schema is compiled once and
 * cached, so calling this on a hot path costs one function call.
 */
export function validate<S extends TSchema>(schema: S, data: unknown, root = ''): Validated<Static<S>> {
  const fn = compiledBy(ajv, compiled, schema);
  if (fn(data)) return { ok: true, value: data as Static<S> };
  const errs = fn.errors ?? [];
  // With unions ajv reports each branch and then the union; the union line is clearer.
  const union = errs.find((e) => e.keyword === 'anyOf');
  const first = union && errs.every((e) => e.instancePath.startsWith(union.instancePath)) ? union : errs[0];
  if (!first) return { ok: false, error: { field: root || '(body)', message: 'is invalid' } };
  // The options are for validateAll's readers; a wire error stays field and message.
  const { field, message } = describe(first, root);
  return { ok: false, error: { field, message } };
}

/** Renders a failure as one line: `report.memory_total_mb must be integer`. */
export function formatFailure(f: ValidationFailure): string {
  return `${f.field} ${f.message}`;
}

/**
 * Like `validate`, but every failure, one per field, in the order ajv finds them; for
 * inputs a person wrote (the catalog), where fixing one typo per try wastes their time.
 */
export function validateAll<S extends TSchema>(
  schema: S,
  data: unknown,
  root = '',
): { ok: true; value: Static<S> } | { ok: false; errors: ValidationFailure[] } {
  const fn = compiledBy(ajvAll, compiledAll, schema);
  if (fn(data)) return { ok: true, value: data as Static<S> };
  const errs = fn.errors ?? [];
  // A union reports each branch it tried and then itself; the union's line is the clearer one.
  const unions = errs.filter((e) => e.keyword === 'anyOf');
  const kept = errs.filter((e) => !unions.some((u) => u !== e && e.schemaPath.startsWith(`${u.schemaPath}/`)));
  const seen = new Set<string>();
  const errors: ValidationFailure[] = [];
  for (const e of kept) {
    const f = describe(e, root);
    // Several rules broken by one value (too long and a bad pattern) are one problem to fix.
    if (seen.has(f.field)) continue;
    seen.add(f.field);
    errors.push(f);
  }
  return { ok: false, errors: errors.length ? errors : [{ field: root || '(body)', message: 'is invalid' }] };
}
