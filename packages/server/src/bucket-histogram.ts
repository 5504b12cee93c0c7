import type { Registry } from 'prom-client';

/** One label set's counts: per bucket (not cumulative), then the sum and count. */
interface Series {
  labels: Record<string, string>;
  counts: number[];
  sum: number;
  count: number;
}

/**
 * A Prometheus histogram for the request path: `observe` finds the bucket and adds,
 * nothing more. prom-client's own observe checks and hashes the label object and keys
 * its buckets by the bound's string on every call, two of them on every request; here
 * that work happens at scrape time, in `getForPromString`, which hands the registry the
 * same values in the same order as prom-client's Histogram, so /metrics reads the same
 * (bucket-histogram.test.ts compares the two).
 */
export class BucketHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
    /** The one label a labelled histogram has (`model`); none when absent. */
    private readonly labelName: string | undefined,
    registry: Registry,
  ) {
    registry.registerMetric(this as never);
    // As prom-client's: a histogram without labels shows its zero series before any observation.
    if (labelName === undefined) this.of(undefined);
  }

  /** An observation, in the series of `labelValue` (a labelled histogram's one label), else the unlabelled one. */
  observe(v: number, labelValue?: string): void {
    this.add(this.of(labelValue), v);
  }

  reset(): void {
    this.series.clear();
  }

  private of(value: string | undefined): Series {
    const k = value ?? '';
    let s = this.series.get(k);
    if (!s) {
      const labels: Record<string, string> = this.labelName !== undefined && value !== undefined ? { [this.labelName]: value } : {};
      this.series.set(k, (s = { labels, counts: this.bounds.map(() => 0), sum: 0, count: 0 }));
    }
    return s;
  }

  private add(s: Series, v: number): void {
    // A value that is no number would poison the sum; prom-client throws on it, the request path must not.
    if (!Number.isFinite(v)) return;
    let i = 0;
    while (i < this.bounds.length && v > this.bounds[i]!) i++;
    if (i < this.bounds.length) s.counts[i]!++;
    s.sum += v;
    s.count++;
  }

  /** What the registry renders: prom-client's Histogram's shape, values and order. */
  getForPromString(): { name: string; help: string; type: string; aggregator: string; values: HistogramValue[] } {
    const values: HistogramValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.series.values()) {
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += s.counts[i]!;
        values.push({ labels: { le }, sharedLabels: s.labels, value: acc, metricName: bucket, exemplar: null });
      });
      values.push({ labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucket, exemplar: null });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum`, exemplar: undefined });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count`, exemplar: undefined });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** As prom-client's `get()`: each value's labels with its series' labels merged in. */
  get(): { name: string; help: string; type: string; aggregator: string; values: Omit<HistogramValue, 'sharedLabels'>[] } {
    const data = this.getForPromString();
    return { ...data, values: data.values.map(({ sharedLabels, ...v }) => ({ ...v, labels: { ...v.labels, ...sharedLabels } })) };
  }
}

interface HistogramValue {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
  metricName: string;
  /** None here; prom-client's values carry the key (null on buckets), and its JSON shows it. */
  exemplar: null | undefined;
}
