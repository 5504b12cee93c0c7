import { describe, expect, it } from '@jest/globals';
import type { Model } from '@llmgw/shared';
import type { CatalogView } from '../controller/controller.js';
import { DomainError } from '../errors.js';
import { bodyFor, parseRequest } from './request.js';

const model = { name: 'llama', aliases: ['l'], source: 'x', profiles: [] } as unknown as Model;
const catalog: CatalogView = {
  models: [model],
  resolve: (n) => (n === 'llama' || n === 'l' ? model : undefined),
  suggest: (n) => (n.startsWith('lla') ? ['llama'] : []),
};
const M = [{ role: 'user', content: 'hi' }];
const parse = (body: unknown) => parseRequest('/v1/chat/completions', Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), catalog);
const failure = (body: unknown) => {
  try {
    parse(body);
  } catch (e) {
    if (e instanceof DomainError) return { code: e.code, message: e.message, field: e.field };
    throw e;
  }
  throw new Error('parsed');
};

describe('parseRequest', () => {
  it('refuses a body that is not a JSON object', () => {
    expect(failure('{nope').code).toBe('invalid_json');
    expect(failure([1])).toEqual({ code: 'invalid_json', message: 'the body must be a JSON object', field: undefined });
  });

  it('needs a model, and one the catalog knows, with a suggestion when one is close', () => {
    expect(failure({ messages: [{ role: 'user', content: 'hi' }] })).toEqual({ code: 'missing_field', message: 'model is required', field: 'model' });
    expect(failure({ model: 'llamma' })).toEqual({
      code: 'model_not_found',
      message: 'The model `llamma` does not exist; did you mean `llama`?',
      field: 'model',
    });
  });

  it('resolves an alias and reads whether the client streams and wants usage', () => {
    const r = parse({ model: 'l', messages: M, stream: true, stream_options: { include_usage: true } });
    expect([r.model.name, r.requested, r.stream, r.clientWantsUsage]).toEqual(['llama', 'l', true, true]);
  });
});

describe('bodyFor', () => {
  it("forwards the client's own bytes when nothing must change", () => {
    const r = parse({ model: 'llama', messages: [{ role: 'user', content: 'hi' }] });
    expect(bodyFor(r, 'llama')).toBe(r.raw);
  });

  it('names the canonical model for an alias or a fallback', () => {
    expect(JSON.parse(bodyFor(parse({ model: 'l', messages: M }), 'llama') as string)).toEqual({ model: 'llama', messages: M });
    expect(JSON.parse(bodyFor(parse({ model: 'llama', messages: M }), 'small') as string)).toEqual({ model: 'small', messages: M });
  });

  it('asks a stream for the usage event the client did not ask for, keeping its other stream options', () => {
    const sent = JSON.parse(bodyFor(parse({ model: 'llama', messages: M, stream: true, stream_options: { x: 1 } }), 'llama') as string) as Record<
      string,
      unknown
    >;
    expect(sent.stream_options).toEqual({ x: 1, include_usage: true });
  });
});
