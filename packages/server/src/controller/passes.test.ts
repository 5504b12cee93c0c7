import { describe, expect, it } from '@jest/globals';
import { PassSchedule } from './passes.js';

const turn = () => new Promise((r) => setImmediate(r));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('PassSchedule', () => {
  const schedule = (boundMs: number) => {
    const passes: number[] = [];
    const s = new PassSchedule(() => passes.push(performance.now()), boundMs);
    return { s, passes };
  };

  it('runs the changes of one turn of the event loop as one pass', async () => {
    const { s, passes } = schedule(60_000);
    s.soon();
    s.soon();
    s.bounded();
    expect(passes).toHaveLength(0);
    await turn();
    expect(passes).toHaveLength(1);
  });

  it('runs at most one pass per bound for changed reports, however many come', async () => {
    const { s, passes } = schedule(300);
    s.bounded();
    await turn();
    expect(passes).toHaveLength(1); // none ran before: at once
    for (let i = 0; i < 5; i++) {
      s.bounded();
      await turn();
    }
    expect(passes).toHaveLength(1);
    await sleep(500);
    expect(passes).toHaveLength(2);
    expect(passes[1]! - passes[0]!).toBeGreaterThanOrEqual(295);
    s.stop();
  });

  it('runs a pass at once for any other change, which covers a report waiting out the bound', async () => {
    const { s, passes } = schedule(60);
    s.run();
    s.bounded();
    s.soon();
    await turn();
    expect(passes).toHaveLength(2);
    // The waiting report's pass was the one just run: none comes at the end of the bound.
    await sleep(100);
    expect(passes).toHaveLength(2);
  });
});
