import { describe, expect, it } from '@jest/globals';
import { Turns } from './turns.js';

describe('Turns', () => {
  it('resolves its waiters in order, one per turn of the event loop, with other work between them', async () => {
    const turns = new Turns();
    const seen: string[] = [];
    const waits = [1, 2, 3].map((i) => turns.wait().then(() => seen.push(`wait ${i}`)));
    // Other work that is ready in every turn (as a health check's request would be).
    let n = 0;
    const other = () => {
      seen.push(`other ${++n}`);
      if (n < 3) setImmediate(other);
    };
    setImmediate(other);
    await Promise.all(waits);
    expect(seen).toEqual(['wait 1', 'other 1', 'wait 2', 'other 2', 'wait 3']);
  });
});
