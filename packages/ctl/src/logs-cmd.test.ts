import { describe, expect, it } from '@jest/globals';
import { newLines } from './logs-cmd.js';

const log = (...ls: string[]) => ls.map((l) => `${l}\n`).join('');

describe('newLines (ctl logs -f)', () => {
  it('shows what was appended, also when the 16 KiB window slid past the start', () => {
    expect(newLines('', log('a', 'b'))).toEqual(['a', 'b']);
    expect(newLines(log('a', 'b'), log('a', 'b', 'c'))).toEqual(['c']);
    expect(newLines(log('a', 'b', 'c'), log('b', 'c', 'd', 'e'))).toEqual(['d', 'e']);
    expect(newLines(log('a', 'b'), log('a', 'b'))).toEqual([]);
  });

  it('finds the overlap among repeated lines, and shows a log with no overlap whole', () => {
    expect(newLines(log('x', 'a', 'x', 'a'), log('x', 'a', 'x', 'a', 'x', 'b'))).toEqual(['x', 'b']);
    expect(newLines(log('ok', 'ok'), log('ok', 'ok', 'ok'))).toEqual(['ok']);
    expect(newLines(log('old', 'engine'), log('new', 'engine'))).toEqual(['new', 'engine']);
    expect(newLines(log('a'), '')).toEqual([]);
  });
});
