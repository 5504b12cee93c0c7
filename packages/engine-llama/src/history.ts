import type { ChatHistoryItem, ChatModelFunctionCall, ChatModelResponse } from 'node-llama-cpp';
import { EngineError } from '@llmgw/engine-http';
import type { ChatMessage } from './runtime.js';

/** JSON arguments as the client sent them back; text that is not JSON stays text. */
function parsedArguments(args: string): unknown {
  try {
    return JSON.parse(args) as unknown;
  } catch {
    return args;
  }
}

/**
 * Chat messages as node-llama-cpp's history. An assistant turn with tool calls becomes a
 * model response holding those calls, each with the result the `tool` message that
 * answers it carries (node-llama-cpp renders calls and results with the model's chat
 * template). A history that ends in tool results is continued by the model in that same
 * response, as node-llama-cpp does after its own function calls; a trailing assistant
 * message is a prefix the model continues; otherwise it answers anew.
 */
export function toHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  /** Calls waiting for their result, by id. */
  const open = new Map<string, ChatModelFunctionCall>();
  for (const [i, m] of messages.entries()) {
    if (m.role === 'system') history.push({ type: 'system', text: m.content });
    else if (m.role === 'user') history.push({ type: 'user', text: m.content });
    else if (m.role === 'assistant') {
      const response: ChatModelResponse['response'] = m.content ? [m.content] : [];
      for (const c of m.toolCalls ?? []) {
        const call: ChatModelFunctionCall = { type: 'functionCall', name: c.name, params: parsedArguments(c.arguments), result: undefined };
        open.set(c.id, call);
        response.push(call);
      }
      history.push({ type: 'model', response });
    } else {
      const call = m.toolCallId === undefined ? undefined : open.get(m.toolCallId);
      if (call === undefined) {
        throw new EngineError('invalid_value', `messages[${i}]: a tool message must answer a tool call of an earlier assistant message`, {
          param: `messages[${i}]`,
        });
      }
      call.result = m.content;
      open.delete(m.toolCallId!);
    }
  }
  const last = messages[messages.length - 1]?.role;
  if (last !== 'assistant' && last !== 'tool') history.push({ type: 'model', response: [] });
  return history;
}
