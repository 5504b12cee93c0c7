import { describe, expect, it } from '@jest/globals';
import { bytesText, downloadText, rateText } from './index.js';

describe('downloadText', () => {
  it.each([
    [{ done_bytes: 210_000_000, total_bytes: 466_000_000, bytes_per_s: 30_000_000 }, 'downloading 45% (210 of 466 MB, 30 MB/s, 9 s left)'],
    [{ done_bytes: 210_000_000, bytes_per_s: 30_000_000 }, 'downloading 210 MB (30 MB/s)'],
    [{ done_bytes: 0, total_bytes: 466_000_000, bytes_per_s: 0 }, 'downloading 0% (0 of 466 MB, stalled)'],
    [{ done_bytes: 1_500_000, total_bytes: 19_000_000_000, bytes_per_s: 2_500_000 }, 'downloading 0% (1.5 MB of 19 GB, 2.5 MB/s, 2 h 7 min left)'],
    [{ done_bytes: 400_000_000, total_bytes: 466_000_000, bytes_per_s: 500_000 }, 'downloading 85% (400 of 466 MB, 500 KB/s, 3 min left)'],
    // A server that sent more than it said must not print 110%.
    [{ done_bytes: 500_000_000, total_bytes: 466_000_000, bytes_per_s: 30_000_000 }, 'downloading 100% (466 of 466 MB, 30 MB/s)'],
    // A small file from a slow server: not `(0 of 1 MB, 0.0 MB/s)` (issue 30 item 9).
    [{ done_bytes: 200_000, total_bytes: 512_000, bytes_per_s: 40_000 }, 'downloading 39% (200 of 512 KB, 40 KB/s, 8 s left)'],
    [{ done_bytes: 2_000, bytes_per_s: 900 }, 'downloading 2.0 KB (900 B/s)'],
    [{ done_bytes: 300_000, total_bytes: 3_400_000_000, bytes_per_s: 1_200_000 }, 'downloading 0% (300 KB of 3.4 GB, 1.2 MB/s, 48 min left)'],
  ])('%j', (d, text) => {
    expect(downloadText(d)).toBe(text);
  });
});

describe('bytesText and rateText', () => {
  it('use the largest unit a figure fills, one decimal below 10', () => {
    expect([0, 999, 1_000, 512_000, 1_200_000, 9_960_000, 466_000_000, 3_400_000_000].map(bytesText)).toEqual([
      '0 B',
      '999 B',
      '1.0 KB',
      '512 KB',
      '1.2 MB',
      '10 MB',
      '466 MB',
      '3.4 GB',
    ]);
    expect([40_000, 2_500_000].map(rateText)).toEqual(['40 KB/s', '2.5 MB/s']);
  });
});
