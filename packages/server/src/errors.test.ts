import { describe, expect, it } from '@jest/globals';
import { ERROR_CODES } from '@llmgw/shared';
import { DomainError, httpStatus, toDomainError } from './errors.js';

describe('httpStatus', () => {
  it('gives every code of the vocabulary an error status', () => {
    for (const code of ERROR_CODES) expect([code, httpStatus(code) >= 400 && httpStatus(code) < 600]).toEqual([code, true]);
  });

  it('keeps the statuses the admin API and the dashboard have always answered with', () => {
    const codes = [
      'invalid_request',
      'missing_field',
      'unauthenticated',
      'forbidden',
      'not_found',
      'model_not_found',
      'too_large',
      'rate_limited',
      'internal',
    ] as const;
    expect(codes.map(httpStatus)).toEqual([400, 400, 401, 403, 404, 404, 413, 429, 500]);
  });
});

describe('toDomainError', () => {
  it("translates express's body-parser failures and keeps a bug's message", () => {
    expect(toDomainError(Object.assign(new SyntaxError('Unexpected token'), { type: 'entity.parse.failed' }))).toMatchObject({
      code: 'invalid_json',
      message: 'invalid JSON: Unexpected token',
    });
    expect(toDomainError({ type: 'entity.too.large', message: 'x' })).toMatchObject({ code: 'too_large', message: 'request body too large' });
    expect(toDomainError(new Error('boom'))).toMatchObject({ code: 'internal', message: 'boom' });
    const e = new DomainError('not_found', 'no node');
    expect(toDomainError(e)).toBe(e);
  });

  it('makes every client fault a 4xx naming the header or field, and never echoes more than a prefix', () => {
    const uri = Object.assign(new URIError(`Failed to decode param '${'%E0'.repeat(100)}'`), { status: 400 });
    const e = toDomainError(uri);
    expect([e.code, httpStatus(e.code), e.field, e.message.length < 120]).toEqual(['invalid_request', 400, 'path', true]);
    expect(toDomainError({ type: 'encoding.unsupported', status: 415, message: 'unsupported content encoding "snappy"' })).toMatchObject({
      code: 'unsupported_media_type',
      field: 'content-encoding',
    });
    expect(toDomainError({ type: 'charset.unsupported', status: 415, message: 'unsupported charset "KOI8-R"' })).toMatchObject({
      code: 'unsupported_media_type',
      field: 'content-type',
    });
    expect(toDomainError({ type: 'parameters.too.many', status: 413, message: 'too many parameters' })).toMatchObject({ code: 'too_large' });
    expect(toDomainError({ status: 400, code: 'Z_DATA_ERROR', message: 'incorrect header check' })).toMatchObject({
      code: 'invalid_request',
      field: 'content-encoding',
    });
    expect(httpStatus('unsupported_media_type')).toBe(415);
  });
});
