import { describe, expect, it } from '@jest/globals';
import { EngineError, errorBody } from './errors.js';
import {
  checkModel,
  embeddingFormat,
  maxTokens,
  messageList,
  optionalInt,
  rejectMultipleChoices,
  rejectUnsupported,
  seed,
  stopSequences,
  streamMode,
  textOrTokenList,
} from './params.js';

/** The error a check throws, as the client would see it. */
function refusal(check: () => unknown): { status: number; body: ReturnType<typeof errorBody> } {
  try {
    check();
  } catch (e) {
    if (e instanceof EngineError) return { status: e.status, body: errorBody(e) };
    throw e;
  }
  throw new Error('the check accepted the request');
}

describe('checkModel', () => {
  it('refuses another model with 404 and OpenAI words', () => {
    expect(refusal(() => checkModel({ model: 'gpt-4' }, 'tiny', false))).toEqual({
      status: 404,
      body: { error: { message: 'The model `gpt-4` does not exist.', type: 'invalid_request_error', param: 'model', code: 'model_not_found' } },
    });
  });

  it('serves the one model to a request without one, unless a model is required', () => {
    expect(() => checkModel({}, 'tiny', false)).not.toThrow();
    expect(() => checkModel({ model: 'tiny' }, 'tiny', true)).not.toThrow();
    expect(refusal(() => checkModel({}, 'tiny', true)).body.error.code).toBe('missing_model');
    expect(refusal(() => checkModel({ model: 7 }, 'tiny', false)).body.error.code).toBe('invalid_type');
  });
});

describe('numbers and switches', () => {
  it('prefers max_completion_tokens and wants positive integers', () => {
    expect(maxTokens({ max_tokens: 5, max_completion_tokens: 9 })).toBe(9);
    expect(maxTokens({ max_tokens: null })).toBeUndefined();
    expect(refusal(() => maxTokens({ max_tokens: 0 })).body.error).toMatchObject({ param: 'max_tokens', code: 'invalid_value' });
    expect(refusal(() => optionalInt({ min_tokens: -1 }, 'min_tokens', 0)).body.error.message).toBe('min_tokens must be a non-negative integer');
  });

  it('folds any integer seed into a u32', () => {
    expect(seed({ seed: -1 })).toBe(2 ** 32 - 1);
    expect(seed({ seed: 2 ** 32 + 3 })).toBe(3);
    expect(refusal(() => seed({ seed: 1.5 })).status).toBe(400);
  });

  it('reads usage only on a stream', () => {
    expect(streamMode({ stream_options: { include_usage: true } })).toEqual({ stream: false, wantUsage: false });
    expect(streamMode({ stream: true, stream_options: { include_usage: true } })).toEqual({ stream: true, wantUsage: true });
    expect(refusal(() => streamMode({ stream: true, stream_options: 'yes' })).body.error.code).toBe('invalid_type');
  });

  it('drops empty stop strings and caps the list', () => {
    expect(stopSequences({ stop: ['a', ''] })).toEqual(['a']);
    expect(stopSequences({ stop: 'x' })).toEqual(['x']);
    expect(refusal(() => stopSequences({ stop: Array(17).fill('s') })).body.error.param).toBe('stop');
  });
});

describe('what an engine cannot do', () => {
  it('refuses several choices and named unsupported fields', () => {
    expect(() => rejectMultipleChoices({ n: 1 })).not.toThrow();
    expect(refusal(() => rejectMultipleChoices({ n: 2 })).body.error).toMatchObject({ code: 'unsupported_value', param: 'n' });
    const fields = [['echo', (v: unknown) => v === true]] as const;
    expect(() => rejectUnsupported({ echo: false }, 'e', fields)).not.toThrow();
    expect(refusal(() => rejectUnsupported({ echo: true }, 'e', fields)).body.error.message).toBe('echo is not supported by e');
  });
});

describe('inputs', () => {
  it('takes text, token ids, and lists of either', () => {
    expect(textOrTokenList('hi', 'prompt')).toEqual(['hi']);
    expect(textOrTokenList([1, 2], 'prompt')).toEqual([[1, 2]]);
    expect(textOrTokenList(['a', [3]], 'prompt')).toEqual(['a', [3]]);
    expect(refusal(() => textOrTokenList([], 'prompt')).body.error.param).toBe('prompt');
    expect(refusal(() => textOrTokenList(['a', [-1]], 'input')).body.error.message).toBe('input[1] must be a string or an array of token ids');
  });

  it('wants messages with roles', () => {
    expect(messageList({ messages: [{ role: 'user', content: 'x' }] })).toEqual([{ role: 'user', content: 'x' }]);
    expect(refusal(() => messageList({ messages: [] })).body.error.param).toBe('messages');
    expect(refusal(() => messageList({ messages: [{ content: 'x' }] })).body.error.param).toBe('messages[0]');
  });

  it('checks the embedding format against the model', () => {
    expect(embeddingFormat({}, 8)).toBe('float');
    expect(embeddingFormat({ encoding_format: 'base64', dimensions: 8 }, 8)).toBe('base64');
    expect(refusal(() => embeddingFormat({ dimensions: 4 }, 8)).body.error.message).toBe('this model only produces 8 dimensions');
    expect(refusal(() => embeddingFormat({ encoding_format: 'hex' }, 8)).body.error.param).toBe('encoding_format');
  });
});

describe('errors', () => {
  it('map each code to one status, and take the status an injected failure asks for', () => {
    expect(new EngineError('request_too_large', 'x').status).toBe(413);
    expect(errorBody(new EngineError('model_loading', 'Loading model')).error.type).toBe('unavailable_error');
    const injected = new EngineError('injected_failure', 'x', { status: 429 });
    expect([injected.status, errorBody(injected).error.type]).toEqual([429, 'rate_limit_error']);
    expect(errorBody(new EngineError('internal_error', 'x')).error.type).toBe('server_error');
  });
});
