import { DomainError } from '../errors.js';

/**
 * The request parameters of each endpoint, with their types, ranges and relations, as
 * OpenAI checks them: a request the gateway forwards is one OpenAI would accept, and a
 * client gets the 400 OpenAI would give (its message, `param` naming the field). One
 * table for every engine, so vLLM, llama.cpp and the built-in engine are all sent the
 * same well-formed requests; what an engine then cannot do, it refuses itself.
 *
 * Parameters not in the table pass through unchecked: engines take extras OpenAI does
 * not know (vLLM's `top_k`, `min_p`, `repetition_penalty`, `chat_template_kwargs`, ...).
 * JSON `null` counts as not given, as OpenAI's API takes it for every optional field.
 */

/** One check of one value: undefined when it passes, else OpenAI's message for it. */
type Check = (v: unknown, name: string) => string | undefined;

const typeName = (v: unknown): string =>
  v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'number' ? (Number.isInteger(v) ? 'an integer' : 'a decimal') : `a ${typeof v}`;
const wrongType = (name: string, want: string, v: unknown) => `Invalid type for '${name}': expected ${want}, but got ${typeName(v)} instead.`;

const num =
  (min: number, max: number, integer = false): Check =>
  (v, name) => {
    const what = integer ? 'integer' : 'decimal';
    if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isInteger(v))) return wrongType(name, integer ? 'an integer' : 'a decimal', v);
    if (v < min) return `Invalid '${name}': ${what} below minimum value. Expected a value >= ${min}, but got ${v} instead.`;
    if (v > max) return `Invalid '${name}': ${what} above maximum value. Expected a value <= ${max}, but got ${v} instead.`;
    return undefined;
  };
const int = (min: number, max = Number.MAX_SAFE_INTEGER): Check => num(min, max, true);
const bool: Check = (v, name) => (typeof v === 'boolean' ? undefined : wrongType(name, 'a boolean', v));
const str: Check = (v, name) => (typeof v === 'string' ? undefined : wrongType(name, 'a string', v));
const obj: Check = (v, name) => (isObject(v) ? undefined : wrongType(name, 'an object', v));
const oneOf =
  (...values: string[]): Check =>
  (v, name) =>
    typeof v === 'string' && values.includes(v) ? undefined : `Invalid value for '${name}': expected one of ${values.map((x) => `'${x}'`).join(', ')}.`;

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const stop: Check = (v, name) => {
  if (typeof v === 'string') return undefined;
  if (!Array.isArray(v)) return wrongType(name, 'a string or an array of strings', v);
  if (v.length > 4) return `Invalid '${name}': array too long. Expected an array with maximum length 4, but got an array with length ${v.length} instead.`;
  const bad = v.findIndex((s) => typeof s !== 'string');
  return bad === -1 ? undefined : wrongType(`${name}[${bad}]`, 'a string', v[bad]);
};

/** `logit_bias`: token ids (as the keys of an object) to a bias in [-100, 100]. */
const logitBias: Check = (v, name) => {
  if (!isObject(v)) return wrongType(name, 'an object', v);
  for (const [k, b] of Object.entries(v)) {
    if (!/^\d{1,10}$/.test(k)) return `Invalid key in '${name}': ${k.slice(0, 64)}. You should only be submitting non-negative integers.`;
    const bad = num(-100, 100)(b, `${name}.${k}`);
    if (bad) return bad;
  }
  return undefined;
};

const nonEmptyArray: Check = (v, name) =>
  !Array.isArray(v)
    ? wrongType(name, 'an array', v)
    : v.length === 0
      ? `Invalid '${name}': empty array. Expected an array with minimum length 1, but got an empty array instead.`
      : undefined;

/** A prompt or an embedding input: a string, strings, token ids, or arrays of token ids. */
const textOrTokens: Check = (v, name) => {
  if (typeof v === 'string') return undefined;
  const bad = nonEmptyArray(v, name);
  if (bad) return bad;
  const tokens = (a: unknown) => Array.isArray(a) && a.length > 0 && a.every((t) => Number.isInteger(t) && (t as number) >= 0);
  if ((v as unknown[]).every((x) => typeof x === 'number')) return tokens(v) ? undefined : `Invalid '${name}': token ids must be non-negative integers.`;
  const i = (v as unknown[]).findIndex((x) => typeof x !== 'string' && !tokens(x));
  return i === -1 ? undefined : wrongType(`${name}[${i}]`, 'a string or an array of token ids', (v as unknown[])[i]);
};

const ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'];
const roleOf = oneOf(...ROLES);

/** Chat `messages`: each with a known role and the fields that role needs. */
const messages: Check = (v, name) => {
  const bad = nonEmptyArray(v, name);
  if (bad) return bad;
  for (const [i, m] of (v as unknown[]).entries()) {
    const at = `${name}[${i}]`;
    if (!isObject(m)) return wrongType(at, 'an object', m);
    if (m.role === undefined) return `Missing required parameter: '${at}.role'.`;
    const role = roleOf(m.role, `${at}.role`);
    if (role) return role;
    const content = m.content;
    const needsContent = m.role !== 'assistant' || (m.tool_calls === undefined && m.function_call === undefined);
    if (content === undefined || content === null) {
      if (needsContent) return `Missing required parameter: '${at}.content'.`;
    } else if (typeof content !== 'string' && !Array.isArray(content)) return wrongType(`${at}.content`, 'one of a string or array of objects', content);
    if (m.role === 'tool' && typeof m.tool_call_id !== 'string') return `Missing required parameter: '${at}.tool_call_id'.`;
    if (m.role === 'assistant' && m.tool_calls !== undefined && m.tool_calls !== null) {
      if (!Array.isArray(m.tool_calls)) return wrongType(`${at}.tool_calls`, 'an array', m.tool_calls);
      const call = m.tool_calls.findIndex((c) => !isObject(c) || typeof c.id !== 'string' || !isObject(c.function) || typeof c.function.name !== 'string');
      if (call !== -1) return `Invalid '${at}.tool_calls[${call}]': each tool call needs an id and a function with a name.`;
    }
  }
  return undefined;
};

/** Chat `tools`: function tools with a name; the Responses API's are flat (`nested: false`). */
const tools =
  (nested: boolean): Check =>
  (v, name) => {
    if (!Array.isArray(v)) return wrongType(name, 'an array', v);
    if (v.length > 128)
      return `Invalid '${name}': array too long. Expected an array with maximum length 128, but got an array with length ${v.length} instead.`;
    for (const [i, t] of v.entries()) {
      if (!isObject(t)) return wrongType(`${name}[${i}]`, 'an object', t);
      if (t.type !== 'function') return `Invalid value for '${name}[${i}].type': expected 'function'.`;
      const fn = nested ? t.function : t;
      if (nested && !isObject(fn)) return `Missing required parameter: '${name}[${i}].function'.`;
      const fname = (fn as Record<string, unknown>).name;
      const at = nested ? `${name}[${i}].function.name` : `${name}[${i}].name`;
      if (typeof fname !== 'string') return `Missing required parameter: '${at}'.`;
      if (!/^[a-zA-Z0-9_-]{1,64}$/.test(fname))
        return `Invalid '${at}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`;
    }
    return undefined;
  };

const toolChoice =
  (nested: boolean): Check =>
  (v, name) => {
    if (typeof v === 'string') return oneOf('none', 'auto', 'required')(v, name);
    if (!isObject(v) || v.type !== 'function') return `Invalid value for '${name}': expected 'none', 'auto', 'required' or a function.`;
    const fname = nested ? (isObject(v.function) ? v.function.name : undefined) : v.name;
    return typeof fname === 'string' ? undefined : `Missing required parameter: '${name}${nested ? '.function' : ''}.name'.`;
  };

/** `response_format` (chat) and `text.format` (Responses, `flat`: the schema beside `type`). */
const format =
  (flat: boolean): Check =>
  (v, name) => {
    if (!isObject(v)) return wrongType(name, 'an object', v);
    const type = oneOf('text', 'json_object', 'json_schema')(v.type, `${name}.type`);
    if (type || v.type !== 'json_schema') return type;
    const js = flat ? v : v.json_schema;
    const at = flat ? name : `${name}.json_schema`;
    if (!isObject(js)) return `Missing required parameter: '${at}'.`;
    if (typeof js.name !== 'string') return `Missing required parameter: '${at}.name'.`;
    if (js.schema !== undefined && !isObject(js.schema)) return wrongType(`${at}.schema`, 'an object', js.schema);
    return undefined;
  };

const streamOptions: Check = (v, name) => {
  if (!isObject(v)) return wrongType(name, 'an object', v);
  return v.include_usage === undefined || v.include_usage === null ? undefined : bool(v.include_usage, `${name}.include_usage`);
};

/** Responses `input`: a string, or message and function-call items. */
/** A Responses message's content parts: objects with a type, their text or image URL a string. */
function contentParts(parts: unknown[], name: string): string | undefined {
  for (const [j, p] of parts.entries()) {
    const at = `${name}[${j}]`;
    if (!isObject(p)) return wrongType(at, 'an object', p);
    if (typeof p.type !== 'string') return wrongType(`${at}.type`, 'a string', p.type);
    if ((p.type === 'input_text' || p.type === 'output_text' || p.type === 'text') && typeof p.text !== 'string')
      return wrongType(`${at}.text`, 'a string', p.text);
    if (p.type === 'input_image' && typeof p.image_url !== 'string') return wrongType(`${at}.image_url`, 'a string', p.image_url);
  }
  return undefined;
}

const responsesInput: Check = (v, name) => {
  if (typeof v === 'string') return undefined;
  if (!Array.isArray(v)) return wrongType(name, 'a string or an array of input items', v);
  for (const [i, item] of v.entries()) {
    const at = `${name}[${i}]`;
    if (!isObject(item)) return wrongType(at, 'an object', item);
    const type = item.type ?? 'message';
    if (type === 'message') {
      const role = oneOf('user', 'assistant', 'system', 'developer')(item.role, `${at}.role`);
      if (role) return role;
      if (typeof item.content !== 'string' && !Array.isArray(item.content))
        return wrongType(`${at}.content`, 'a string or an array of content parts', item.content);
      if (Array.isArray(item.content)) {
        const bad = contentParts(item.content, `${at}.content`);
        if (bad) return bad;
      }
    } else if (type === 'function_call') {
      if (typeof item.call_id !== 'string' || typeof item.name !== 'string' || typeof item.arguments !== 'string')
        return `Invalid '${at}': a function_call item needs call_id, name and arguments strings.`;
    } else if (type === 'function_call_output') {
      if (typeof item.call_id !== 'string') return `Missing required parameter: '${at}.call_id'.`;
      if (typeof item.output !== 'string') return wrongType(`${at}.output`, 'a string', item.output);
    } else return `Invalid value for '${at}.type': expected 'message', 'function_call' or 'function_call_output'.`;
  }
  return undefined;
};

/** A parameter: its check, and whether a request without it is refused. */
interface Param {
  check: Check;
  required?: boolean;
}

const SAMPLING: Record<string, Param> = {
  temperature: { check: num(0, 2) },
  top_p: { check: num(0, 1) },
  frequency_penalty: { check: num(-2, 2) },
  presence_penalty: { check: num(-2, 2) },
  logit_bias: { check: logitBias },
  seed: { check: int(Number.MIN_SAFE_INTEGER) },
  stop: { check: stop },
  n: { check: int(1, 128) },
  stream: { check: bool },
  stream_options: { check: streamOptions },
  user: { check: str },
};

/** Per endpoint: its parameters. The relations between them are in {@link RELATIONS}. */
export const PARAMETERS: Readonly<Record<string, Readonly<Record<string, Param>>>> = {
  '/v1/chat/completions': {
    ...SAMPLING,
    messages: { check: messages, required: true },
    max_tokens: { check: int(1) },
    max_completion_tokens: { check: int(1) },
    logprobs: { check: bool },
    top_logprobs: { check: int(0, 20) },
    tools: { check: tools(true) },
    tool_choice: { check: toolChoice(true) },
    parallel_tool_calls: { check: bool },
    response_format: { check: format(false) },
  },
  '/v1/completions': {
    ...SAMPLING,
    prompt: { check: textOrTokens, required: true },
    // 0 with `echo`: the prompt's logprobs and nothing generated (lm-eval's loglikelihood).
    max_tokens: { check: int(0) },
    echo: { check: bool },
    logprobs: { check: int(0, 5) },
    suffix: { check: str },
    best_of: { check: int(1, 20) },
  },
  '/v1/embeddings': {
    input: { check: textOrTokens, required: true },
    encoding_format: { check: oneOf('float', 'base64') },
    dimensions: { check: int(1) },
    user: { check: str },
  },
  '/v1/responses': {
    input: { check: responsesInput, required: true },
    instructions: { check: str },
    max_output_tokens: { check: int(16) },
    temperature: SAMPLING.temperature!,
    top_p: SAMPLING.top_p!,
    top_logprobs: { check: int(0, 20) },
    stream: { check: bool },
    stream_options: { check: streamOptions },
    tools: { check: tools(false) },
    tool_choice: { check: toolChoice(false) },
    parallel_tool_calls: { check: bool },
    text: { check: (v, name) => obj(v, name) ?? (isObject(v) && v.format != null ? format(true)(v.format, `${name}.format`) : undefined) },
    store: { check: bool },
    previous_response_id: { check: str },
    metadata: { check: obj },
    include: { check: (v, name) => (Array.isArray(v) && v.every((x) => typeof x === 'string') ? undefined : wrongType(name, 'an array of strings', v)) },
    user: { check: str },
  },
};

/** Each endpoint's required parameters. */
const REQUIRED: Readonly<Record<string, readonly string[]>> = Object.fromEntries(
  Object.entries(PARAMETERS).map(([path, params]) => [path, Object.keys(params).filter((n) => params[n]!.required)]),
);

const given = (body: Record<string, unknown>, name: string) => body[name] !== undefined && body[name] !== null;

/** A relation between parameters: the field it faults and OpenAI's message, when the body breaks it. */
type Relation = (body: Record<string, unknown>, path: string) => [field: string, message: string] | undefined;

export const RELATIONS: readonly Relation[] = [
  (b) =>
    given(b, 'stream_options') && b.stream !== true
      ? ['stream_options', "The 'stream_options' parameter is only allowed when 'stream' is enabled."]
      : undefined,
  (b) =>
    given(b, 'tool_choice') && !given(b, 'tools')
      ? ['tool_choice', "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."]
      : undefined,
  (b) =>
    given(b, 'parallel_tool_calls') && !given(b, 'tools')
      ? ['parallel_tool_calls', "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified."]
      : undefined,
  (b, path) =>
    path === '/v1/chat/completions' && given(b, 'top_logprobs') && b.logprobs !== true
      ? ['top_logprobs', "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used."]
      : undefined,
  (b) => {
    const choice = b.tool_choice;
    if (!isObject(choice) || !Array.isArray(b.tools)) return undefined;
    const name = isObject(choice.function) ? choice.function.name : choice.name;
    const names = b.tools.map((t) => (isObject(t) ? (isObject(t.function) ? t.function.name : t.name) : undefined));
    return names.includes(name)
      ? undefined
      : ['tool_choice', `Invalid value for 'tool_choice': no function named '${String(name).slice(0, 64)}' was specified in the 'tools' parameter.`];
  },
  (b) =>
    typeof b.best_of === 'number' && typeof b.n === 'number' && b.best_of < b.n
      ? ['best_of', "Invalid value for 'best_of': 'best_of' must be greater than or equal to 'n'."]
      : undefined,
  (b) =>
    typeof b.best_of === 'number' && b.best_of > 1 && b.stream === true
      ? ['best_of', "Invalid value for 'best_of': 'best_of' cannot be used with 'stream'."]
      : undefined,
  (b) =>
    b.max_tokens === 0 && b.echo !== true
      ? ['max_tokens', "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead."]
      : undefined,
];

/**
 * Refuses, with OpenAI's 400, a body `path` would not accept: a missing required
 * parameter, a parameter of the wrong type or out of range, or a broken relation.
 */
export function validateParams(path: string, body: Record<string, unknown>): void {
  const params = PARAMETERS[path];
  if (!params) return;
  // Over the body's keys (a handful), not the table's: this runs on every request.
  for (const name in body) {
    const p = Object.hasOwn(params, name) ? params[name] : undefined;
    const v = body[name];
    if (p === undefined || v === undefined || v === null) continue;
    const bad = p.check(v, name);
    if (bad) throw new DomainError('invalid_request', bad, { field: name });
  }
  for (const name of REQUIRED[path] ?? []) {
    if (body[name] === undefined || body[name] === null) throw new DomainError('missing_field', `Missing required parameter: '${name}'.`, { field: name });
  }
  for (const rel of RELATIONS) {
    const broken = rel(body, path);
    if (broken) throw new DomainError('invalid_request', broken[1], { field: broken[0] });
  }
}
