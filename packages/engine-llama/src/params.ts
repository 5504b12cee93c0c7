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
};

/** Validates `messages` into the roles a chat template knows. */
export function chatMessages(body: JsonObject): ChatMessage[] {
  return params.messageList(body).map((m, i) => {
    const param = `messages[${i}]`;
    const role = ROLES[m.role];
    if (role === undefined) {
      throw new EngineError('invalid_value', `${param}.role '${m.role}' is not supported (system, developer, user, assistant)`, { param: `${param}.role` });
    }
    return { role, content: contentText(m.content, `${param}.content`) };
  });
}
