import { describe, expect, it } from '@jest/globals';
import { ERROR_CODES } from '@llmgw/shared';
import { DomainError, httpStatus, toDomainError } from './errors.js';

describe('httpStatus', () => {
  it('gives every code of the vocabulary an error status', () => {
    for (const code of ERROR_CODES) expect([code, httpStatus(code) >= 400 && httpStatus(code) < 600]).toEqual([code, true]);
  });

  it('keeps the statuses the admin API and the dashboard have always answered with', () => {
    const codes = ['invalid_request', 'missing_field', 'unauthenticated', 'forbidden', 'not_found', 'model_not_found', 'too_large', 'rate_limited', 'internal'] as const;
    expect(codes.map(httpStatus)).toEqual([400, 400, 401, 403, 404, 404, 413, 429, 500]);
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
