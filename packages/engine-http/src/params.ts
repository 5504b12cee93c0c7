import { EngineError } from './errors.js';
import { isObject } from './json.js';
import type { Json, JsonObject } from './json.js';

/** OpenAI allows 4 stop sequences; a little more slack costs nothing here. */
const MAX_STOP = 16;

/** JSON null counts as not given, as OpenAI's SDKs send it for unset optional fields. */
export function absent(v: Json | undefined): v is undefined | null {
  return v === undefined || v === null;
}

export function optionalInt(body: JsonObject, name: string, min: number): number | undefined {
  const value = body[name];
  if (absent(value)) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    const what = min === 1 ? 'a positive integer' : min === 0 ? 'a non-negative integer' : `an integer >= ${min}`;
    throw new EngineError('invalid_value', `${name} must be ${what}`, { param: name });
  }
  return value;
}

export function optionalPositiveInt(body: JsonObject, name: string): number | undefined {
  return optionalInt(body, name, 1);
}

export function optionalNumber(body: JsonObject, name: string, min: number, max: number): number | undefined {
  const value = body[name];
  if (absent(value)) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw new EngineError('invalid_value', `${name} must be a number between ${min} and ${max}`, { param: name });
  }
  return value;
}

export function optionalBoolean(body: JsonObject, name: string): boolean | undefined {
  const value = body[name];
  if (absent(value)) return undefined;
  if (typeof value !== 'boolean') throw new EngineError('invalid_type', `${name} must be a boolean`, { param: name });
  return value;
}

/**
 * `model` names the served model. `required`: a request without one is refused (as
 * OpenAI does); otherwise it gets the one there is (as llama-server and vLLM do).
 */
export function checkModel(body: JsonObject, servedName: string, required: boolean): void {
  const model = body.model;
  if (typeof model !== 'string' || model === '') {
    if (required) throw new EngineError('missing_model', 'you must provide a model parameter', { param: 'model' });
    if (absent(model)) return;
    if (typeof model !== 'string') throw new EngineError('invalid_type', 'model must be a string', { param: 'model' });
  }
  if (model !== servedName) throw new EngineError('model_not_found', `The model \`${model}\` does not exist.`, { param: 'model' });
}

/** `stream: true` and, with it, `stream_options.include_usage` (meaningless without a stream). */
export function streamMode(body: JsonObject): { stream: boolean; wantUsage: boolean } {
  const stream = optionalBoolean(body, 'stream') === true;
  return { stream, wantUsage: stream && includeUsage(body) };
}

function includeUsage(body: JsonObject): boolean {
  const streamOptions = body.stream_options;
  if (absent(streamOptions)) return false;
  if (!isObject(streamOptions)) throw new EngineError('invalid_type', 'stream_options must be an object', { param: 'stream_options' });
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
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new EngineError('invalid_value', 'seed must be an integer', { param: 'seed' });
  return ((value % 2 ** 32) + 2 ** 32) % 2 ** 32;
}

export function stopSequences(body: JsonObject): string[] {
  const value = body.stop;
  if (absent(value)) return [];
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length > MAX_STOP || !list.every((s): s is string => typeof s === 'string')) {
    throw new EngineError('invalid_value', `stop must be a string or an array of at most ${MAX_STOP} strings`, { param: 'stop' });
  }
  return list.filter((s) => s !== '');
}

/** One choice only: silently answering one of several would hide bugs in callers. */
export function rejectMultipleChoices(body: JsonObject): void {
  const n = optionalPositiveInt(body, 'n');
  if (n !== undefined && n !== 1) throw new EngineError('unsupported_value', 'only n=1 is supported', { param: 'n' });
}

/** Fields an engine cannot honour are refused, not ignored, so a caller never gets quietly less. */
export function rejectUnsupported(body: JsonObject, engine: string, fields: ReadonlyArray<readonly [string, (v: Json) => boolean]>): void {
  for (const [name, isSet] of fields) {
    const value = body[name];
    if (!absent(value) && isSet(value)) {
      throw new EngineError('unsupported_parameter', `${name} is not supported by ${engine}`, { param: name });
    }
  }
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
      throw new EngineError('invalid_value', `${param}[${i}] must be a string or an array of token ids`, { param });
    });
  }
  throw new EngineError('invalid_value', `${param} must be a string, an array of strings, or token ids`, { param });
}

/** `messages` of /v1/chat/completions: a non-empty array of objects that each have a role. */
export function messageList(body: JsonObject): Array<JsonObject & { role: string }> {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new EngineError('invalid_value', 'messages must be a non-empty array', { param: 'messages' });
  }
  return messages.map((m, i) => {
    if (!isObject(m) || typeof m.role !== 'string') {
      throw new EngineError('invalid_value', `messages[${i}] must be an object with a role`, { param: `messages[${i}]` });
    }
    return m as JsonObject & { role: string };
  });
}

export type EmbeddingFormat = 'float' | 'base64';

/**
 * `encoding_format` and `dimensions` of /v1/embeddings against the model's vector
 * length; there is one length per model, so `dimensions` can only repeat it.
 */
export function embeddingFormat(body: JsonObject, vectorLength: number): EmbeddingFormat {
  const format = body.encoding_format ?? 'float';
  if (format !== 'float' && format !== 'base64') {
    throw new EngineError('invalid_value', "encoding_format must be 'float' or 'base64'", { param: 'encoding_format' });
  }
  const dimensions = optionalPositiveInt(body, 'dimensions');
  if (dimensions !== undefined && dimensions !== vectorLength) {
    throw new EngineError('invalid_value', `this model only produces ${vectorLength} dimensions`, { param: 'dimensions' });
  }
  return format;
}
