import { EngineError, isObject, params } from '@llmgw/engine-http';
import type { Json, JsonObject } from '@llmgw/engine-http';
import type { ChatMessage } from './runtime.js';

/** Text of a message's content; anything but text parts is refused, since the model would never see it. */
function contentText(content: Json | undefined, param: string): string {
  if (typeof content === 'string') return content;
  if (params.absent(content)) return '';
  if (Array.isArray(content)) {
    return content
      .map((part, i) => {
        if (isObject(part) && part.type === 'text' && typeof part.text === 'string') return part.text;
        throw new EngineError('unsupported_content', `${param}[${i}]: only text content parts are supported`, { param: `${param}[${i}]` });
      })
      .join('');
  }
  throw new EngineError('invalid_type', `${param} must be a string or an array of content parts`, { param });
}

const ROLES: Readonly<Record<string, ChatMessage['role']>> = {
  system: 'system',
  developer: 'system',
  user: 'user',
  assistant: 'assistant',
  tool: 'tool',
};

/** Validates `messages` into the roles a chat template knows. */
export function chatMessages(body: JsonObject): ChatMessage[] {
  return params.messageList(body).map((m, i) => {
    const param = `messages[${i}]`;
    const role = ROLES[m.role];
    if (role === undefined) {
      throw new EngineError('invalid_value', `${param}.role '${m.role}' is not supported (system, developer, user, assistant, tool)`, {
        param: `${param}.role`,
      });
    }
    const message: ChatMessage = { role, content: contentText(m.content, `${param}.content`) };
    if (role === 'tool') {
      if (typeof m.tool_call_id !== 'string') throw new EngineError('invalid_value', `${param}.tool_call_id is required`, { param: `${param}.tool_call_id` });
      message.toolCallId = m.tool_call_id;
    }
    if (role === 'assistant' && Array.isArray(m.tool_calls)) {
      message.toolCalls = m.tool_calls.map((c, j) => {
        const fn = isObject(c) ? c.function : undefined;
        if (!isObject(c) || typeof c.id !== 'string' || !isObject(fn) || typeof fn.name !== 'string') {
          throw new EngineError('invalid_value', `${param}.tool_calls[${j}] needs an id and a function name`, { param: `${param}.tool_calls` });
        }
        return { id: c.id, name: fn.name, arguments: typeof fn.arguments === 'string' ? fn.arguments : '{}' };
      });
    }
    return message;
  });
}
