import { describe, expect, it } from '@jest/globals';
import { ERROR_CODES } from '@llmgw/shared';
import { CtlError, FAILURES, answerFailure, asCtlError, exitCode, refusedWith } from './failure.js';
import { parseExpiry } from './tables.js';

describe('exit codes', () => {
  it('gives each kind of failure its own documented code', () => {
    expect(FAILURES.map((f) => [f, exitCode(f)])).toEqual([
      ['failed', 1],
      ['usage', 2],
      ['unreachable', 3],
    ]);
  });

  it('reports a bad flag as usage and an unexpected error as a plain failure', () => {
    let thrown: unknown;
    try {
      parseExpiry('someday', new Date(0));
    } catch (e) {
      thrown = e;
    }
    expect(exitCode(asCtlError(thrown).failure)).toBe(2);
    expect(asCtlError(new TypeError('x'))).toMatchObject({ message: 'x', failure: 'failed' });
    const own = new CtlError('gone', 'unreachable');
    expect(asCtlError(own)).toBe(own);
  });
});

describe('error answers', () => {
  it('are judged by their code, whatever the status: every code of ours is the server refusing', () => {
    expect(new Set(ERROR_CODES.map((c) => answerFailure(c, 503)))).toEqual(new Set(['failed']));
    expect(answerFailure('store_unavailable', 503)).toBe('failed');
  });

  it('without a code, by the status: a gateway error is a proxy that could not reach llmgw', () => {
    expect([502, 503, 504, 404, 500, 401].map((s) => [s, answerFailure(undefined, s)])).toEqual([
      [502, 'unreachable'],
      [503, 'unreachable'],
      [504, 'unreachable'],
      [404, 'failed'],
      [500, 'failed'],
      [401, 'failed'],
    ]);
  });

  it('refusedWith takes the code over the status, and the status only when there is no code', () => {
    expect(refusedWith(new CtlError('no node', 'failed', 404, 'not_found'), 'not_found', 404)).toBe(true);
    // A missing route is a 404 too, but not a missing replica.
    expect(refusedWith(new CtlError('no route', 'failed', 404, 'no_route'), 'not_found', 404)).toBe(false);
    expect(refusedWith(new CtlError('not found', 'failed', 404), 'not_found', 404)).toBe(true);
    expect(refusedWith(new CtlError('bad', 'failed', 400), 'not_found', 404)).toBe(false);
    expect(refusedWith(new Error('x'), 'not_found', 404)).toBe(false);
  });
});
