import { isAlias, isMap, isScalar, isSeq, type Document, type Pair } from 'yaml';

/** With `merge` on, the parser turns a `<<` key into a symbol. */
const isMergeKey = (key: unknown): boolean => {
  if (!isScalar(key)) return false;
  return key.value === '<<' || (typeof key.value === 'symbol' && key.value.description === '<<');
};

/**
 * Maps a validator field path (`models[0].profiles[1].min_memory_gb`) back to the YAML
 * node it came from, to tell the operator which line to look at.
 */
export class Locator {
  constructor(
    private readonly doc: Document,
    private readonly lineAt: (offset: number) => number,
  ) {}

  /** The line of the deepest node on the path that exists: the parent's, for a missing key. */
  line(field: string): number {
    let node: unknown = this.doc.contents;
    let line = this.nodeLine(node) ?? 1;
    let rest = field;
    while (rest) {
      node = this.deref(node);
      const item = /^\[(\d+)\]/.exec(rest);
      if (item) {
        const next = isSeq(node) ? node.items[Number(item[1])] : undefined;
        if (next === undefined) break;
        node = next;
        line = this.nodeLine(next) ?? line;
        rest = rest.slice(item[0].length);
        continue;
      }
      rest = rest.replace(/^\./, '');
      const found = this.findKey(node, rest);
      if (!found) break;
      node = found.pair.value;
      line = this.nodeLine(found.pair.key) ?? this.nodeLine(found.pair.value) ?? line;
      rest = rest.slice(found.key.length);
    }
    return line;
  }

  /**
   * The pair whose key starts `rest`. Keys may contain dots (`kubernetes.io/role` in a
   * node_selector), so the path cannot simply be split: match the document's own keys,
   * longest first, then look through `<<` merges.
   */
  private findKey(node: unknown, rest: string): { pair: Pair; key: string } | undefined {
    if (!isMap(node)) return undefined;
    let best: { pair: Pair; key: string } | undefined;
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      const ends = rest.length === key.length || rest[key.length] === '.' || rest[key.length] === '[';
      if (rest.startsWith(key) && ends && key.length > (best?.key.length ?? -1)) best = { pair, key };
    }
    if (best) return best;
    for (const pair of node.items) {
      if (!isMergeKey(pair.key)) continue;
      const sources = this.deref(pair.value);
      for (const source of isSeq(sources) ? sources.items : [sources]) {
        const found = this.findKey(this.deref(source), rest);
        if (found) return found;
      }
    }
    return undefined;
  }

  private deref(node: unknown): unknown {
    return isAlias(node) ? node.resolve(this.doc) : node;
  }

  private nodeLine(node: unknown): number | undefined {
    const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
    return range ? this.lineAt(range[0]) : undefined;
  }
}
