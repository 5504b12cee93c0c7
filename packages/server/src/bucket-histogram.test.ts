import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { BucketHistogram } from './bucket-histogram.js';

const BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

describe('BucketHistogram', () => {
  it("renders what prom-client's Histogram renders for the same observations", async () => {
    const value = fc.oneof(fc.double({ min: 0, max: 20, noNaN: true }), fc.constantFrom(...BOUNDS), fc.constant(0));
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c'), value), { maxLength: 60 }),
        fc.array(value, { maxLength: 20 }),
        async (labelled, plain) => {
          const [theirs, ours] = [new Registry(), new Registry()];
          const ref = new Histogram({ name: 'x_seconds', help: 'h', labelNames: ['model'], buckets: BOUNDS, registers: [theirs] });
          const refPlain = new Histogram({ name: 'y_seconds', help: 'h2', buckets: BOUNDS, registers: [theirs] });
          const mine = new BucketHistogram('x_seconds', 'h', BOUNDS, 'model', ours);
          const minePlain = new BucketHistogram('y_seconds', 'h2', BOUNDS, undefined, ours);
          for (const [m, v] of labelled) {
            ref.labels(m).observe(v);
            mine.observe(v, m);
          }
          for (const v of plain) {
            refPlain.observe(v);
            minePlain.observe(v);
          }
          expect(await ours.metrics()).toBe(await theirs.metrics());
          expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
        },
      ),
      { numRuns: 200 },
    );
  });

  it('ignores a value that is no number instead of throwing on the request path', async () => {
    const reg = new Registry();
    const h = new BucketHistogram('z_seconds', 'h', BOUNDS, undefined, reg);
    h.observe(Number.NaN);
    h.observe(0.2);
    expect(await reg.metrics()).toContain('z_seconds_count 1');
  });
});
