import { describe, expect, it } from '@jest/globals';
import { parseSize } from './settings.js';

describe('parseSize (--model-cache-max)', () => {
  it.each([
    ['50G', 50 * 1024 ** 3],
    ['50GB', 50 * 1024 ** 3],
    ['500m', 500 * 1024 ** 2],
    ['1.5T', 1.5 * 1024 ** 4],
    ['4096', 4096],
  ])('%s', (v, want) => expect(parseSize('--model-cache-max', v)).toBe(want));

  it.each(['', 'lots', '0', '-5G', '5X'])('refuses "%s"', (v) => expect(() => parseSize('--model-cache-max', v)).toThrow(/invalid --model-cache-max .*want a size such as 50G/));
});
