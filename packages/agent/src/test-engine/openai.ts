import type { IncomingMessage } from 'node:http';

export interface OpenAIErrorBody {
  error: {
    message: string;
    type: string;
    param: string | null;
    code: string | null;
  };
}

export function openAIError(message: string, type: string, code: string | null = null, param: string | null = null): OpenAIErrorBody {
  return { error: { message, type, param, code } };
}

/** The `type` OpenAI uses for a status, so gateways that classify errors by type see realistic values. */
export function errorTypeForStatus(status: number): string {
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usage(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/** A client error with the OpenAI fields it is reported with; both engines throw it. */
export class RequestError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

/** Largest request body either engine accepts. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** Reads and parses a JSON object body; 413 or 400 in OpenAI's words for anything else. */
export async function readJson(req: IncomingMessage): Promise<JsonObject> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > MAX_BODY_BYTES) throw new RequestError(413, `request body over ${MAX_BODY_BYTES} bytes`, null, 'request_too_large');
    chunks.push(buf);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new RequestError(400, 'We could not parse the JSON body of your request.', null, 'invalid_json');
  }
  if (!isObject(parsed)) throw new RequestError(400, 'the request body must be a JSON object', null, 'invalid_json');
  return parsed;
}
