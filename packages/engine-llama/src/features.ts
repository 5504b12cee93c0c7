import { EngineError, isObject, params } from '@llmgw/engine-http';
import type { Json, JsonObject } from '@llmgw/engine-http';

/**
 * What a request asks of the sampler and the output beyond temperature and top_p, read
 * from the OpenAI body: each is honoured through node-llama-cpp or refused with a 400
 * naming the field, never ignored.
 */
export interface Sampling {
  topK?: number;
  minP?: number;
  /** node-llama-cpp's repeatPenalty; absent when no penalty was asked for. */
  repeat?: { penalty: number; frequencyPenalty: number; presencePenalty: number };
  /** OpenAI `logit_bias`: token id to bias in [-100, 100]; -100 bans the token. */
  logitBias?: ReadonlyMap<number, number>;
}

/** How the output is constrained: free text, any JSON, or JSON matching a schema (a grammar each). */
export type OutputGrammar = { kind: 'json' } | { kind: 'schema'; schema: JsonObject; param: string };

/** A function tool as node-llama-cpp takes it. */
export interface Tool {
  name: string;
  description?: string;
  parameters?: JsonObject;
}

/**
 * What the tools of a chat request ask for: node-llama-cpp's function calling (`auto`),
 * or a call the model must make (`required`, a named function), generated as JSON
 * arguments through a JSON-schema grammar since node-llama-cpp has no way to force one.
 */
export type ToolUse = { mode: 'auto'; tools: Tool[] } | { mode: 'forced'; tools: Tool[] };

export function sampling(body: JsonObject): Sampling {
  const s: Sampling = {};
  const topK = body.top_k;
  if (!params.absent(topK)) {
    if (typeof topK !== 'number' || !Number.isInteger(topK) || topK < -1)
      throw new EngineError('invalid_value', 'top_k must be an integer >= -1', { param: 'top_k' });
    // -1 is vLLM's "all tokens"; node-llama-cpp says 0.
    s.topK = Math.max(0, topK);
  }
  s.minP = params.optionalNumber(body, 'min_p', 0, 1);
  const frequency = params.optionalNumber(body, 'frequency_penalty', -2, 2) ?? 0;
  const presence = params.optionalNumber(body, 'presence_penalty', -2, 2) ?? 0;
  const repetition = params.optionalNumber(body, 'repetition_penalty', 0.01, 10) ?? params.optionalNumber(body, 'repeat_penalty', 0.01, 10) ?? 1;
  if (frequency !== 0 || presence !== 0 || repetition !== 1) s.repeat = { penalty: repetition, frequencyPenalty: frequency, presencePenalty: presence };
  const bias = body.logit_bias;
  if (!params.absent(bias)) {
    if (!isObject(bias)) throw new EngineError('invalid_type', 'logit_bias must be an object of token ids to numbers', { param: 'logit_bias' });
    const map = new Map<number, number>();
    for (const [k, v] of Object.entries(bias)) {
      if (!/^\d{1,10}$/.test(k) || typeof v !== 'number' || !Number.isFinite(v) || v < -100 || v > 100) {
        throw new EngineError('invalid_value', 'logit_bias maps token ids to numbers between -100 and 100', { param: 'logit_bias' });
      }
      map.set(Number(k), v);
    }
    if (map.size) s.logitBias = map;
  }
  return s;
}

/** `response_format`: text (no grammar), json_object, or json_schema with its schema. */
export function outputGrammar(body: JsonObject): OutputGrammar | undefined {
  const f = body.response_format;
  if (params.absent(f)) return undefined;
  if (!isObject(f)) throw new EngineError('invalid_type', 'response_format must be an object', { param: 'response_format' });
  if (f.type === 'text') return undefined;
  if (f.type === 'json_object') return { kind: 'json' };
  if (f.type === 'json_schema') {
    const js = f.json_schema;
    const schema = isObject(js) ? js.schema : undefined;
    // OpenAI's json_schema without a schema takes any JSON object.
    if (params.absent(schema)) return { kind: 'json' };
    if (!isObject(schema)) throw new EngineError('invalid_type', 'response_format.json_schema.schema must be an object', { param: 'response_format' });
    return { kind: 'schema', schema, param: 'response_format' };
  }
  throw new EngineError('invalid_value', "response_format.type must be 'text', 'json_object' or 'json_schema'", { param: 'response_format' });
}

function tool(t: Json, i: number): Tool {
  const fn = isObject(t) && t.type === 'function' ? t.function : undefined;
  if (!isObject(fn) || typeof fn.name !== 'string')
    throw new EngineError('invalid_value', `tools[${i}] must be a function tool with a name`, { param: 'tools' });
  return {
    name: fn.name,
    ...(typeof fn.description === 'string' ? { description: fn.description } : {}),
    ...(isObject(fn.parameters) ? { parameters: fn.parameters } : {}),
  };
}

/** `tools` and `tool_choice`: undefined when no tool may be called (none given, or `tool_choice: none`). */
export function toolUse(body: JsonObject): ToolUse | undefined {
  if (!params.absent(body.functions))
    throw new EngineError('unsupported_parameter', 'functions is not supported (deprecated by OpenAI): use tools', { param: 'functions' });
  if (params.absent(body.tools)) {
    if (!params.absent(body.tool_choice))
      throw new EngineError('invalid_value', 'tool_choice is only allowed when tools are specified', { param: 'tool_choice' });
    return undefined;
  }
  if (!Array.isArray(body.tools)) throw new EngineError('invalid_type', 'tools must be an array', { param: 'tools' });
  const tools = body.tools.map(tool);
  if (tools.length === 0) return undefined;
  const choice = body.tool_choice ?? 'auto';
  if (choice === 'none') return undefined;
  if (choice === 'auto') return { mode: 'auto', tools };
  if (choice === 'required') return { mode: 'forced', tools };
  const name = isObject(choice) && isObject(choice.function) ? choice.function.name : undefined;
  const named = tools.find((t) => t.name === name);
  if (named === undefined)
    throw new EngineError('invalid_value', "tool_choice must be 'none', 'auto', 'required' or one of the tools", { param: 'tool_choice' });
  return { mode: 'forced', tools: [named] };
}

/** A function's parameters as a schema for its arguments: an object, any properties when none are given. */
function argumentsSchema(t: Tool): JsonObject {
  return t.parameters ?? { type: 'object', properties: {} };
}

/**
 * The grammar of a forced tool call: `{"name": ..., "arguments": {...}}` for one of the
 * tools, so the model can only produce a call to a tool it was given, with arguments of
 * the tool's schema.
 */
export function forcedCallGrammar(tools: readonly Tool[]): OutputGrammar {
  const call = (t: Tool): JsonObject => ({ type: 'object', properties: { name: { const: t.name }, arguments: argumentsSchema(t) } });
  const schema = tools.length === 1 ? call(tools[0]!) : { oneOf: tools.map(call) };
  return { kind: 'schema', schema, param: 'tools' };
}

/** Chat `logprobs`/`top_logprobs`, completions' `logprobs` (a count): how many alternatives per token, or undefined for none. */
export function chatLogprobs(body: JsonObject): number | undefined {
  if (params.optionalBoolean(body, 'logprobs') !== true) {
    if (!params.absent(body.top_logprobs)) throw new EngineError('invalid_value', "top_logprobs needs 'logprobs': true", { param: 'top_logprobs' });
    return undefined;
  }
  return params.optionalNumber(body, 'top_logprobs', 0, 20) ?? 0;
}

export function completionLogprobs(body: JsonObject): number | undefined {
  const v = body.logprobs;
  if (params.absent(v) || v === false) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 20)
    throw new EngineError('invalid_value', 'logprobs must be an integer between 0 and 20', { param: 'logprobs' });
  return v;
}
