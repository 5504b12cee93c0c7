import { describe, expect, it } from '@jest/globals';
import { ERROR_CODES, isErrorCode } from './index.js';

describe('ERROR_CODES', () => {
  it('lists each code once, in snake_case', () => {
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
    for (const c of ERROR_CODES) expect(c).toMatch(/^[a-z]+(_[a-z]+)*$/);
  });

  it('tells its own codes from any other string', () => {
    expect(isErrorCode('not_found')).toBe(true);
    expect(isErrorCode('Not Found')).toBe(false);
    expect(isErrorCode(404)).toBe(false);
  });
});
