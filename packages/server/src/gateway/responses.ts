import { randomUUID } from 'node:crypto';
import { StringDecoder } from 'node:string_decoder';
import type { Model } from '@llmgw/shared';
import { DomainError } from '../errors.js';
import { isObject } from './params.js';
import type { EngineBody } from './sse.js';

/**
 * The OpenAI Responses API (`POST /v1/responses`) on engines that serve only chat
 * completions: the request becomes a chat request, the reply (whole or streamed) becomes
 * a `response` object or its events. Engines that serve the Responses API themselves
 * get the request as the client sent it (see {@link servesResponses}).
 *
 * Nothing is stored: `previous_response_id`, `background` and `store: true` are refused
 * with a 400 naming the field, and there is no `GET /v1/responses/{id}`. The client
 * sends the whole conversation each time (as input items), as with chat completions.
 */

type Obj = Record<string, unknown>;

/**
 * Whether every profile of the model runs an engine that serves `/v1/responses` itself:
 * vLLM does; any other profile says so with `responses_api: true`.
 */
export function servesResponses(model: Model): boolean {
  return model.profiles.every((p) => p.responses_api ?? p.engine === 'vllm');
}

const refuse = (field: string, why: string) => new DomainError('invalid_request', why, { field });

/** The chat message content of a Responses content part list: text as a string, images as image parts. */
function content(c: unknown): unknown {
  if (!Array.isArray(c)) return c;
  const parts = c.map((p: Obj) => {
    if (p.type === 'input_text' || p.type === 'output_text' || p.type === 'text') return { type: 'text', text: p.text };
    if (p.type === 'input_image') return { type: 'image_url', image_url: { url: p.image_url, ...(p.detail ? { detail: p.detail } : {}) } };
    throw refuse('input', `content parts of type '${String(p.type).slice(0, 40)}' are not supported on this model`);
  });
  return parts.every((p) => p.type === 'text') ? parts.map((p) => (p as { text: string }).text).join('') : parts;
}

/** `instructions` and `input` as chat messages: function calls join the assistant turn, their outputs become tool messages. */
function messages(body: Obj): Obj[] {
  const out: Obj[] = [];
  if (typeof body.instructions === 'string') out.push({ role: 'system', content: body.instructions });
  if (typeof body.input === 'string') return [...out, { role: 'user', content: body.input }];
  for (const item of body.input as Obj[]) {
    const type = item.type ?? 'message';
    if (type === 'message') out.push({ role: item.role === 'developer' ? 'system' : item.role, content: content(item.content) });
    else if (type === 'function_call') {
      const call = { id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } };
      const last = out.at(-1);
      if (last?.role === 'assistant' && Array.isArray(last.tool_calls)) (last.tool_calls as Obj[]).push(call);
      else out.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else out.push({ role: 'tool', tool_call_id: item.call_id, content: item.output });
  }
  return out;
}

/**
 * Refuses, by field, what translation cannot do. Called as the request is read (before
 * the key's queue, so a refused request waits for nothing) and again by `toChat`, since
 * a fallback model may translate where the first passed through.
 */
export function refuseUntranslatable(body: Obj): void {
  if (body.previous_response_id != null)
    throw refuse('previous_response_id', 'previous_response_id is not supported: llmgw stores no responses; send the conversation as input items');
  if (body.background === true) throw refuse('background', 'background responses are not supported: llmgw stores no responses');
  if (body.store === true) throw refuse('store', 'store: true is not supported: llmgw stores no responses (send store: false)');
  if (body.truncation != null && body.truncation !== 'disabled') throw refuse('truncation', "only truncation 'disabled' is supported");
  if (body.reasoning != null) throw refuse('reasoning', 'reasoning options are not supported on this model');
  const include = (Array.isArray(body.include) ? body.include : []) as string[];
  const other = include.find((i) => i !== 'message.output_text.logprobs');
  if (other !== undefined) throw refuse('include', `include '${other.slice(0, 64)}' is not supported on this model`);
}

/** The chat completions request for a Responses request (already checked against `PARAMETERS`). */
export function toChat(body: Obj, model: string): Obj {
  refuseUntranslatable(body);
  const include = (Array.isArray(body.include) ? body.include : []) as string[];
  const chat: Obj = { model, messages: messages(body) };
  for (const k of ['temperature', 'top_p', 'user', 'parallel_tool_calls', 'seed', 'top_k', 'min_p', 'frequency_penalty', 'presence_penalty', 'logit_bias']) {
    if (body[k] != null) chat[k] = body[k];
  }
  if (body.max_output_tokens != null) chat.max_tokens = body.max_output_tokens;
  if (include.length || body.top_logprobs != null) {
    chat.logprobs = true;
    if (body.top_logprobs != null) chat.top_logprobs = body.top_logprobs;
  }
  if (Array.isArray(body.tools)) {
    chat.tools = (body.tools as Obj[]).map((t) => ({
      type: 'function',
      function: {
        name: t.name,
        ...(t.description != null ? { description: t.description } : {}),
        parameters: t.parameters ?? { type: 'object', properties: {} },
        ...(t.strict != null ? { strict: t.strict } : {}),
      },
    }));
  }
  const choice = body.tool_choice;
  if (choice != null) chat.tool_choice = isObject(choice) ? { type: 'function', function: { name: choice.name } } : choice;
  const fmt = isObject(body.text) ? body.text.format : undefined;
  if (isObject(fmt) && fmt.type === 'json_object') chat.response_format = { type: 'json_object' };
  if (isObject(fmt) && fmt.type === 'json_schema') {
    const { type: _t, ...schema } = fmt;
    chat.response_format = { type: 'json_schema', json_schema: schema };
  }
  if (body.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  return chat;
}

/** A chat `usage` as the Responses API words it. */
function responseUsage(u: unknown): Obj | null {
  if (!isObject(u)) return null;
  const input = Number(u.prompt_tokens ?? 0);
  const output = Number(u.completion_tokens ?? 0);
  const cached = isObject(u.prompt_tokens_details) ? Number(u.prompt_tokens_details.cached_tokens ?? 0) : 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

/** Chat logprobs (`choice.logprobs.content`) as output_text's. */
function logprobs(lp: unknown): Obj[] {
  if (!isObject(lp) || !Array.isArray(lp.content)) return [];
  return (lp.content as Obj[]).map((t) => ({
    token: t.token,
    logprob: t.logprob,
    bytes: t.bytes ?? [],
    top_logprobs: Array.isArray(t.top_logprobs) ? (t.top_logprobs as Obj[]).map((a) => ({ token: a.token, logprob: a.logprob, bytes: a.bytes ?? [] })) : [],
  }));
}

const hex = () => randomUUID().replaceAll('-', '');

/** One translation: the ids and what the request said, repeated on the response object. */
export class ResponsesTranslation {
  readonly id = `resp_${hex()}`;
  private readonly msgId = `msg_${hex()}`;
  private readonly createdAt = Math.floor(Date.now() / 1000);

  constructor(private readonly request: Obj) {}

  /** The `response` object around `output`, as the request shaped it. */
  private response(status: string, output: Obj[], usage: Obj | null, incomplete: boolean): Obj {
    const r = this.request;
    const fmt = isObject(r.text) && isObject(r.text.format) ? r.text.format : { type: 'text' };
    return {
      id: this.id,
      object: 'response',
      created_at: this.createdAt,
      status,
      error: null,
      incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
      instructions: r.instructions ?? null,
      max_output_tokens: r.max_output_tokens ?? null,
      model: r.model,
      output,
      parallel_tool_calls: r.parallel_tool_calls ?? true,
      previous_response_id: null,
      store: false,
      temperature: r.temperature ?? 1,
      text: { format: fmt },
      tool_choice: r.tool_choice ?? 'auto',
      tools: r.tools ?? [],
      top_p: r.top_p ?? 1,
      truncation: 'disabled',
      metadata: r.metadata ?? {},
      ...(usage ? { usage } : {}),
    };
  }

  private message(text: string, lps: Obj[], status = 'completed'): Obj {
    return { type: 'message', id: this.msgId, status, role: 'assistant', content: [{ type: 'output_text', text, annotations: [], logprobs: lps }] };
  }

  /** A non-streamed chat completion (the engine's bytes) as a `response`; an unreadable one is the engine's failure. */
  json(buf: Buffer): Buffer {
    let chat: Obj;
    try {
      chat = JSON.parse(buf.toString('utf8')) as Obj;
    } catch {
      throw new DomainError('upstream_failed', 'the engine answered with a body that is not JSON');
    }
    const choice = (Array.isArray(chat.choices) ? chat.choices[0] : undefined) as Obj | undefined;
    const msg = isObject(choice?.message) ? choice.message : {};
    const output: Obj[] = [];
    if (typeof msg.content === 'string' && msg.content !== '') output.push(this.message(msg.content, logprobs(choice?.logprobs)));
    for (const tc of Array.isArray(msg.tool_calls) ? (msg.tool_calls as Obj[]) : []) {
      const fn = isObject(tc.function) ? tc.function : {};
      output.push({ type: 'function_call', id: `fc_${hex()}`, call_id: tc.id, name: fn.name, arguments: fn.arguments ?? '{}', status: 'completed' });
    }
    const incomplete = choice?.finish_reason === 'length';
    return Buffer.from(JSON.stringify(this.response(incomplete ? 'incomplete' : 'completed', output, responseUsage(chat.usage), incomplete)));
  }

  /**
   * A streamed chat completion as the Responses API's events (see {@link ResponseEvents}).
   * The engine's bytes are decoded across chunks (a character split between two is read
   * whole), and an event growing past `maxEventBytes` ends the stream as the relay's own
   * bound does: an engine that never ends an event must not grow the gateway's memory.
   */
  stream(body: EngineBody, maxEventBytes: number): EngineBody {
    const events = new ResponseEvents(this);
    async function* translate(): AsyncGenerator<Buffer> {
      const decoder = new StringDecoder('utf8');
      let pending = '';
      for await (const chunk of body) {
        pending += decoder.write(chunk);
        const end = pending.lastIndexOf('\n\n');
        if (end === -1) {
          if (Buffer.byteLength(pending) > maxEventBytes) throw new Error(`the engine sent an event over ${maxEventBytes} bytes`);
          continue;
        }
        const whole = pending.slice(0, end);
        pending = pending.slice(end + 2);
        const out = whole
          .split('\n\n')
          .map((ev) => events.chunk(ev))
          .join('');
        if (out) yield Buffer.from(out);
      }
      const last = events.finish();
      if (last) yield Buffer.from(last);
    }
    const it = translate();
    return Object.assign(it, { destroy: (err?: Error) => body.destroy(err) });
  }

  /** For {@link ResponseEvents}. */
  build(status: string, output: Obj[], usage: unknown, incomplete: boolean): Obj {
    return this.response(status, output, responseUsage(usage), incomplete);
  }

  messageItem(text: string, lps: Obj[], status?: string): Obj {
    return this.message(text, lps, status);
  }

  get messageId(): string {
    return this.msgId;
  }
}

/**
 * The event sequence of a streamed response, built from chat chunks: `response.created`,
 * `response.in_progress`, then per output item `output_item.added`, its deltas and its
 * `done` events, and `response.completed` (or `response.incomplete` when cut at
 * max_output_tokens). The engine's usage chunk is passed on as it came, after the events
 * it belongs with, so the relay counts it (and drops it: the client never sees it).
 */
class ResponseEvents {
  private seq = 0;
  private started = false;
  private finished = false;
  private readonly output: Obj[] = [];
  /** The message item being streamed, with its text and logprobs so far. */
  private text?: { index: number; text: string; logprobs: Obj[] };
  /** Function calls by their chat index. */
  private readonly calls = new Map<number, { index: number; item: Obj }>();
  private finishReason: unknown;
  private usage: unknown;

  constructor(private readonly t: ResponsesTranslation) {}

  private event(type: string, fields: Obj): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.seq++, ...fields })}\n\n`;
  }

  private start(): string {
    if (this.started) return '';
    this.started = true;
    const r = this.t.build('in_progress', [], null, false);
    return this.event('response.created', { response: r }) + this.event('response.in_progress', { response: r });
  }

  /** One chat SSE event in, the Responses events it makes out. */
  chunk(ev: string): string {
    const data = ev.startsWith('data:') ? ev.slice(5).trim() : '';
    if (data === '' || this.finished) return '';
    if (data === '[DONE]') return this.finish();
    let c: Obj;
    try {
      c = JSON.parse(data) as Obj;
    } catch {
      return '';
    }
    if (isObject(c.error)) {
      this.finished = true;
      return this.event('error', { code: c.error.code ?? null, message: c.error.message ?? 'engine error', param: c.error.param ?? null });
    }
    let out = this.start();
    if (c.usage != null) this.usage = c.usage;
    const choice = (Array.isArray(c.choices) ? c.choices[0] : undefined) as Obj | undefined;
    // The usage chunk itself, for the relay to count.
    if (!choice) return c.usage != null ? `${out}${ev}\n\n` : out;
    const delta = isObject(choice.delta) ? choice.delta : {};
    if (typeof delta.content === 'string' && delta.content !== '') out += this.textDelta(delta.content, logprobs(choice.logprobs));
    if (Array.isArray(delta.tool_calls)) for (const tc of delta.tool_calls as Obj[]) out += this.callDelta(tc);
    if (choice.finish_reason != null) this.finishReason = choice.finish_reason;
    return out;
  }

  private textDelta(delta: string, lps: Obj[]): string {
    let out = '';
    if (!this.text) {
      this.text = { index: this.output.length, text: '', logprobs: [] };
      this.output.push({});
      out += this.event('response.output_item.added', { output_index: this.text.index, item: { ...this.t.messageItem('', [], 'in_progress'), content: [] } });
      out += this.event('response.content_part.added', {
        item_id: this.t.messageId,
        output_index: this.text.index,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
      });
    }
    this.text.text += delta;
    this.text.logprobs.push(...lps);
    return out + this.event('response.output_text.delta', { item_id: this.t.messageId, output_index: this.text.index, content_index: 0, delta, logprobs: lps });
  }

  private callDelta(tc: Obj): string {
    const i = typeof tc.index === 'number' ? tc.index : 0;
    const fn = isObject(tc.function) ? tc.function : {};
    let out = '';
    let call = this.calls.get(i);
    if (!call) {
      call = {
        index: this.output.length,
        item: {
          type: 'function_call',
          id: `fc_${randomUUID().replaceAll('-', '')}`,
          call_id: tc.id ?? `call_${i}`,
          name: fn.name ?? '',
          arguments: '',
          status: 'in_progress',
        },
      };
      this.calls.set(i, call);
      this.output.push(call.item);
      out += this.event('response.output_item.added', { output_index: call.index, item: { ...call.item } });
    }
    if (typeof fn.arguments === 'string' && fn.arguments !== '') {
      call.item.arguments = `${String(call.item.arguments)}${fn.arguments}`;
      out += this.event('response.function_call_arguments.delta', { item_id: call.item.id, output_index: call.index, delta: fn.arguments });
    }
    return out;
  }

  /** The `done` events of every item, then the response's last event. */
  finish(): string {
    if (this.finished) return '';
    this.finished = true;
    let out = this.start();
    if (this.text) {
      const { index, text, logprobs: lps } = this.text;
      const id = this.t.messageId;
      out += this.event('response.output_text.done', { item_id: id, output_index: index, content_index: 0, text, logprobs: lps });
      out += this.event('response.content_part.done', {
        item_id: id,
        output_index: index,
        content_index: 0,
        part: { type: 'output_text', text, annotations: [], logprobs: lps },
      });
      this.output[index] = this.t.messageItem(text, lps);
      out += this.event('response.output_item.done', { output_index: index, item: this.output[index] });
    }
    for (const { index, item } of this.calls.values()) {
      item.status = 'completed';
      out += this.event('response.function_call_arguments.done', { item_id: item.id, output_index: index, name: item.name, arguments: item.arguments });
      out += this.event('response.output_item.done', { output_index: index, item });
    }
    const incomplete = this.finishReason === 'length';
    const response = this.t.build(incomplete ? 'incomplete' : 'completed', this.output, this.usage, incomplete);
    return out + this.event(incomplete ? 'response.incomplete' : 'response.completed', { response });
  }
}
