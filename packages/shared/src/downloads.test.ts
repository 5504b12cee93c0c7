import { describe, expect, it } from '@jest/globals';
import { downloadText } from './index.js';

describe('downloadText', () => {
  it.each([
    [{ done_bytes: 210_000_000, total_bytes: 466_000_000, bytes_per_s: 30_000_000 }, 'downloading 45% (210 of 466 MB, 30 MB/s, 9 s left)'],
    [{ done_bytes: 210_000_000, bytes_per_s: 30_000_000 }, 'downloading 210 MB (30 MB/s)'],
    [{ done_bytes: 0, total_bytes: 466_000_000, bytes_per_s: 0 }, 'downloading 0% (0 of 466 MB, stalled)'],
    [{ done_bytes: 1_500_000, total_bytes: 19_000_000_000, bytes_per_s: 2_500_000 }, 'downloading 0% (1.5 of 19000 MB, 2.5 MB/s, 2 h 7 min left)'],
    [{ done_bytes: 400_000_000, total_bytes: 466_000_000, bytes_per_s: 500_000 }, 'downloading 85% (400 of 466 MB, 0.5 MB/s, 3 min left)'],
    // A server that sent more than it said must not print 110%.
    [{ done_bytes: 500_000_000, total_bytes: 466_000_000, bytes_per_s: 30_000_000 }, 'downloading 100% (466 of 466 MB, 30 MB/s)'],
  ])('%j', (d, text) => {
    expect(downloadText(d)).toBe(text);
  });
});
