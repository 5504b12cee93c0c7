import type { IncomingMessage } from 'node:http';
import { EngineError } from './errors.js';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Largest request body an engine accepts. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** Reads and parses a JSON object body; 413 or 400 in OpenAI's words for anything else. */
export async function readJson(req: IncomingMessage): Promise<JsonObject> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > MAX_BODY_BYTES) throw new EngineError('request_too_large', `request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(buf);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new EngineError('invalid_json', 'We could not parse the JSON body of your request.');
  }
  if (!isObject(parsed)) throw new EngineError('invalid_json', 'the request body must be a JSON object');
  return parsed;
}
