import { describe, expect, it } from '@jest/globals';
import { DomainError } from '../errors.js';
import { asDomainError, errorEvent, openAIError } from './errors.js';

describe('openAIError', () => {
  it('gives a per-minute limit its status, OpenAI type and code, and says to retry after the wait', () => {
    const e = openAIError(new DomainError('rate_limited', 'slow down', { retryAfterS: 12 }));
    expect(e).toEqual({
      status: 429,
      headers: { 'retry-after': '12', 'x-should-retry': 'true' },
      body: { error: { message: 'slow down', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' } },
    });
  });

  it('tells the SDKs not to retry a bad key, and names the field at fault', () => {
    expect(openAIError(new DomainError('unauthenticated', 'no')).headers).toEqual({ 'x-should-retry': 'false' });
    expect(openAIError(new DomainError('model_not_found', 'no such model', { field: 'model' }))).toMatchObject({
      status: 404,
      body: { error: { type: 'invalid_request_error', code: 'model_not_found', param: 'model' } },
    });
  });

  it('keeps the wire codes clients already see', () => {
    const wire = (code: ConstructorParameters<typeof DomainError>[0]) => openAIError(new DomainError(code, '')).body.error.code;
    expect(wire('no_route')).toBe('unknown_url');
    expect(wire('too_large')).toBe('request_too_large');
    expect(wire('concurrency_limited')).toBe('concurrency_limit_exceeded');
    expect(wire('upstream_failed')).toBe('upstream_error');
    expect(wire('internal')).toBeNull();
  });
});

describe('errorEvent', () => {
  it('is one SSE data event holding the OpenAI error body', () => {
    expect(errorEvent(new DomainError('no_ready_replica', 'none'))).toBe(
      'data: {"error":{"message":"none","type":"server_error","param":null,"code":"no_ready_replica"}}\n\n',
    );
  });
});

describe('asDomainError', () => {
  it('passes domain errors through and reports anything else as an internal error', () => {
    const seen: unknown[] = [];
    const known = new DomainError('invalid_json', 'x');
    expect(asDomainError(known, (e) => seen.push(e))).toBe(known);
    const bug = new TypeError('oops');
    const e = asDomainError(bug, (x) => seen.push(x));
    expect([e.code, e.message]).toEqual(['internal', 'internal error: oops']);
    expect(seen).toEqual([bug]);
  });
});
