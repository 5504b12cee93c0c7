import { describe, expect, it } from '@jest/globals';
import { ERROR_CODES } from '@llmgw/shared';
import { DomainError, httpStatus, toDomainError } from './errors.js';

describe('httpStatus', () => {
  it('gives every code of the vocabulary an error status', () => {
    for (const code of ERROR_CODES) expect([code, httpStatus(code) >= 400 && httpStatus(code) < 600]).toEqual([code, true]);
  });

  it('keeps the statuses the admin API has always answered with', () => {
    expect(['invalid_request', 'unauthenticated', 'not_found', 'model_not_found', 'too_large', 'internal'].map((c) => httpStatus(c as never))).toEqual([400, 401, 404, 404, 413, 500]);
  });
});

describe('toDomainError', () => {
  it("translates express's body-parser failures and keeps a bug's message", () => {
    expect(toDomainError(Object.assign(new SyntaxError('Unexpected token'), { type: 'entity.parse.failed' }))).toMatchObject({ code: 'invalid_json', message: 'invalid JSON: Unexpected token' });
    expect(toDomainError({ type: 'entity.too.large', message: 'x' })).toMatchObject({ code: 'too_large', message: 'request body too large' });
    expect(toDomainError(new Error('boom'))).toMatchObject({ code: 'internal', message: 'boom' });
    const e = new DomainError('not_found', 'no node');
    expect(toDomainError(e)).toBe(e);
  });
});
