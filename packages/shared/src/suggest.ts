/**
 * Levenshtein distance, one row at a time. With `max`, gives up as soon as the distance
 * is known to exceed it and returns `max + 1`: two strings whose lengths differ by more
 * than `max` cost nothing, so a huge input (a 10 MB model name) is not compared at all.
 */
export function editDistance(a: string, b: string, max = Infinity): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  // Row i holds the distances from a's first i characters to each prefix of b.
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  let distance = b.length;
  for (let i = 1; i <= a.length; i++) {
    let diag = i - 1; // prev[j - 1]
    let left = i; // cur[j - 1]
    const cur = [left];
    for (const [k, up] of prev.slice(1).entries()) {
      left = Math.min(up + 1, left + 1, diag + (a[i - 1] === b[k] ? 0 : 1));
      cur.push(left);
      diag = up;
    }
    prev = cur;
    distance = left;
    // A row's minimum never decreases further down.
    if (max !== Infinity && Math.min(...cur) > max) return max + 1;
  }
  return distance;
}

/**
 * The one of `options` closest to what was typed, ignoring case, when it is close enough
 * to be a typo (at most 2 edits, or a third of its length); undefined otherwise. For the
 * "(did you mean …?)" of a mistyped command, path or value.
 */
export function nearest(typed: string, options: readonly string[]): string | undefined {
  const t = typed.toLowerCase();
  const limit = Math.max(2, Math.floor(t.length / 3));
  return options
    .map((o) => ({ o, d: editDistance(t, o.toLowerCase(), limit) }))
    .filter((c) => c.d <= limit)
    .sort((a, b) => a.d - b.d)[0]?.o;
}
