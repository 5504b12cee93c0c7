import { isObject, RequestError } from '../test-engine/openai.js';
export { readJson, RequestError } from '../test-engine/openai.js';
import type { Json, JsonObject } from '../test-engine/openai.js';
import type { ChatMessage } from './runtime.js';

/** OpenAI allows 4 stop sequences; a little more slack costs nothing here. */
const MAX_STOP = 16;

function absent(v: Json | undefined): v is undefined | null {
  return v === undefined || v === null;
}

export function optionalPositiveInt(body: JsonObject, name: string): number | undefined {
  const value = body[name];
  if (absent(value)) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new RequestError(400, `${name} must be a positive integer`, name, 'invalid_value');
  }
  return value;
}

export function optionalNumber(body: JsonObject, name: string, min: number, max: number): number | undefined {
  const value = body[name];
  if (absent(value)) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw new RequestError(400, `${name} must be a number between ${min} and ${max}`, name, 'invalid_value');
  }
  return value;
}

export function optionalBoolean(body: JsonObject, name: string): boolean | undefined {
  const value = body[name];
  if (absent(value)) return undefined;
  if (typeof value !== 'boolean') throw new RequestError(400, `${name} must be a boolean`, name, 'invalid_type');
  return value;
}

/** `stream_options.include_usage`; only meaningful with `stream: true`. */
export function includeUsage(body: JsonObject): boolean {
  const streamOptions = body.stream_options;
  if (absent(streamOptions)) return false;
  if (!isObject(streamOptions)) throw new RequestError(400, 'stream_options must be an object', 'stream_options', 'invalid_type');
  return optionalBoolean(streamOptions, 'include_usage') === true;
}

/** `max_completion_tokens` is OpenAI's successor of `max_tokens`, so it wins when both are set. */
export function maxTokens(body: JsonObject): number | undefined {
  return optionalPositiveInt(body, 'max_completion_tokens') ?? optionalPositiveInt(body, 'max_tokens');
}

/** OpenAI takes any integer; llama.cpp's sampler wants a u32, so fold it into that range. */
export function seed(body: JsonObject): number | undefined {
  const value = body.seed;
  if (absent(value)) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new RequestError(400, 'seed must be an integer', 'seed', 'invalid_value');
  return ((value % 2 ** 32) + 2 ** 32) % 2 ** 32;
}

export function stopSequences(body: JsonObject): string[] {
  const value = body.stop;
  if (absent(value)) return [];
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length > MAX_STOP || !list.every((s): s is string => typeof s === 'string')) {
    throw new RequestError(400, `stop must be a string or an array of at most ${MAX_STOP} strings`, 'stop', 'invalid_value');
  }
  return list.filter((s) => s !== '');
}

/** One choice only: silently answering one of several would hide bugs in callers. */
export function rejectMultipleChoices(body: JsonObject): void {
  const n = optionalPositiveInt(body, 'n');
  if (n !== undefined && n !== 1) throw new RequestError(400, 'only n=1 is supported', 'n', 'unsupported_value');
}

/** Fields this engine cannot honour are refused, not ignored, so a caller never gets quietly less. */
export function rejectUnsupported(body: JsonObject, fields: ReadonlyArray<readonly [string, (v: Json) => boolean]>): void {
  for (const [name, isSet] of fields) {
    const value = body[name];
    if (!absent(value) && isSet(value)) {
      throw new RequestError(400, `${name} is not supported by node-llama-cpp-engine`, name, 'unsupported_parameter');
    }
  }
}

function contentText(content: Json | undefined, param: string): string {
  if (typeof content === 'string') return content;
  if (absent(content)) return '';
  if (Array.isArray(content)) {
    return content
      .map((part, i) => {
        if (isObject(part) && part.type === 'text' && typeof part.text === 'string') return part.text;
        throw new RequestError(400, `${param}[${i}]: only text content parts are supported`, `${param}[${i}]`, 'unsupported_content');
      })
      .join('');
  }
  throw new RequestError(400, `${param} must be a string or an array of content parts`, param, 'invalid_type');
}

const ROLES: Readonly<Record<string, ChatMessage['role']>> = {
  system: 'system',
  developer: 'system',
  user: 'user',
  assistant: 'assistant',
};

/** Validates `messages` into the roles a chat template knows. */
export function chatMessages(body: JsonObject): ChatMessage[] {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new RequestError(400, 'messages must be a non-empty array', 'messages', 'invalid_value');
  }
  return messages.map((m, i) => {
    const param = `messages[${i}]`;
    if (!isObject(m) || typeof m.role !== 'string') throw new RequestError(400, `${param} must be an object with a role`, param, 'invalid_value');
    const role = ROLES[m.role];
    if (role === undefined) {
      throw new RequestError(400, `${param}.role '${m.role}' is not supported (system, developer, user, assistant)`, `${param}.role`, 'invalid_value');
    }
    return { role, content: contentText(m.content, `${param}.content`) };
  });
}

function isTokenArray(v: Json): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === 'number' && Number.isInteger(t) && t >= 0);
}

/**
 * `prompt` of /v1/completions and `input` of /v1/embeddings: a string, an array of
 * strings, an array of token ids, or an array of those arrays.
 */
export function textOrTokenList(value: Json | undefined, param: string): Array<string | number[]> {
  if (typeof value === 'string') return [value];
  if (isTokenArray(value ?? null)) return [value as number[]];
  if (Array.isArray(value) && value.length > 0) {
    return value.map((item, i) => {
      if (typeof item === 'string') return item;
      if (isTokenArray(item)) return item;
      throw new RequestError(400, `${param}[${i}] must be a string or an array of token ids`, param, 'invalid_value');
    });
  }
  throw new RequestError(400, `${param} must be a string, an array of strings, or token ids`, param, 'invalid_value');
}
