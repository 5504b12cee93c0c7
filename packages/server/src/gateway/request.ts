import type { IncomingMessage } from 'node:http';
import type { Model } from '@llmgw/shared';
import type { CatalogView } from '../controller/controller.js';
import { MAX_MODEL_NAME } from '../catalog/loaded.js';
import { DomainError } from '../errors.js';
import { validateParams } from './params.js';

/** The OpenAI endpoints the gateway forwards; everything else but /health(z) and /v1/models[/{id}] is a 404. */
export const ENDPOINTS: ReadonlySet<string> = new Set(['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses']);

/** The Responses API's endpoint: passed through or translated (`responses.ts`). */
export const RESPONSES = '/v1/responses';

/** At most `max` characters of client input for an error message, with `…` when cut. */
export function clip(s: string, max = 64): string {
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/** What a client asked for, read once: the body is parsed only to find the model. */
export interface ClientRequest {
  path: string;
  /** The body as the client sent it: forwarded as these bytes when nothing must change. */
  raw: Buffer;
  body: Record<string, unknown>;
  /** The model name or alias as the client wrote it. */
  requested: string;
  /** The catalog model it resolves to: for a LoRA adapter, its base. */
  model: Model;
  /** The LoRA adapter the client named as its model, served by a replica of `model`. */
  adapter?: string;
  stream: boolean;
  /** Whether a streaming client asked for the usage event (`stream_options.include_usage`). */
  clientWantsUsage: boolean;
}

/** Reads the body whole, refusing one over `limit` bytes as soon as that is known. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > limit) {
      req.resume();
      reject(new DomainError('too_large', `request body of ${declared} bytes is over the limit of ${limit}`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(new DomainError('too_large', `request body is over the limit of ${limit} bytes`));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** The body as a JSON object with a model the catalog knows. */
export function parseRequest(path: string, raw: Buffer, catalog: CatalogView): ClientRequest {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
  } catch (e) {
    throw new DomainError('invalid_json', `invalid JSON body: ${clip((e as Error).message, 200)}`);
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new DomainError('invalid_json', 'the body must be a JSON object');
  if (typeof body.model !== 'string' || !body.model) throw new DomainError('missing_field', 'model is required', { field: 'model' });
  const requested = body.model;
  // Before any lookup: suggestions cost the name's length times the catalog's.
  if (requested.length > MAX_MODEL_NAME)
    throw new DomainError('invalid_request', `model \`${clip(requested)}\` is longer than ${MAX_MODEL_NAME} characters`, { field: 'model' });
  const named = catalog.resolve(requested);
  const adapted = named ? undefined : catalog.adapter?.(requested);
  const model = named ?? adapted?.model;
  if (!model) {
    const close = catalog.suggest(requested);
    const hint = close.length ? `; did you mean ${close.map((c) => `\`${c}\``).join(', ')}?` : '';
    throw new DomainError('model_not_found', `The model \`${clip(requested)}\` does not exist${hint}`, { field: 'model' });
  }
  validateParams(path, body);
  const stream = body.stream === true;
  // A Responses API stream always ends with its usage (in `response.completed`): nothing to add or drop.
  const clientWantsUsage = path === RESPONSES || (stream && (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true);
  return { path, raw, body, requested, model, ...(adapted ? { adapter: requested } : {}), stream, clientWantsUsage };
}

/**
 * The body to send to a replica of `model`: the client's own bytes in the common case;
 * rewritten only when the model is an alias or a fallback, or when a stream needs the
 * usage event for counting that the client did not ask for.
 */
export function bodyFor(r: ClientRequest, model: string): Buffer | string {
  const addUsage = r.stream && !r.clientWantsUsage;
  // On its base, an adapter is asked for by its own name, as engines serve adapters.
  const name = r.adapter && model === r.model.name ? r.adapter : model;
  if (r.requested === name && !addUsage) return r.raw;
  const b: Record<string, unknown> = { ...r.body, model: name };
  if (addUsage) b.stream_options = { ...(r.body.stream_options ?? {}), include_usage: true };
  return JSON.stringify(b);
}
