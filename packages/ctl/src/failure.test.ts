import { describe, expect, it } from '@jest/globals';
import { CtlError, FAILURES, asCtlError, exitCode } from './failure.js';
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
