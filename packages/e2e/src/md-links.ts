import fs from 'node:fs';
import path from 'node:path';

/**
 * Links in Markdown as GitHub resolves them: `[text](target)`, `![alt](target)` and
 * `[ref]: target`, outside code. A relative target must name a file or folder inside
 * the repository, and a `#anchor` a heading of the Markdown file it points to.
 */

export interface Link {
  file: string;
  line: number;
  target: string;
}

/** The text with fenced blocks and inline code blanked (line numbers kept). */
function withoutCode(md: string): string {
  let inFence = false;
  return md
    .split('\n')
    .map((l) => {
      if (/^\s*(```|~~~)/.test(l)) {
        inFence = !inFence;
        return '';
      }
      return inFence ? '' : l.replace(/`[^`]*`/g, '');
    })
    .join('\n');
}

export function links(file: string, md: string): Link[] {
  const out: Link[] = [];
  withoutCode(md)
    .split('\n')
    .forEach((l, i) => {
      for (const m of l.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ file, line: i + 1, target: m[1]! });
      const ref = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(l);
      if (ref) out.push({ file, line: i + 1, target: ref[1]! });
    });
  return out;
}

/** GitHub's anchors for a file's headings: lower case, punctuation dropped, spaces to `-`, repeats numbered. */
export function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const l of withoutCode(md.replace(/`([^`]*)`/g, '$1')).split('\n')) {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(l);
    if (!h) continue;
    const text = h[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

/**
 * What is wrong with a link of `link.file` (relative to `root`), or undefined when nothing
 * is: a relative target outside the repository or naming no tracked file or folder
 * (`tracked`: `git ls-files`), or an anchor that no heading of its file makes.
 */
export function problem(root: string, tracked: ReadonlySet<string>, link: Link): string | undefined {
  const { target } = link;
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto: …
  const [rawPath = '', anchor] = target.split('#', 2);
  const pathPart = decodeURIComponent(rawPath);
  const abs =
    pathPart === '' ? path.join(root, link.file) : pathPart.startsWith('/') ? path.join(root, pathPart) : path.resolve(root, path.dirname(link.file), pathPart);
  const rel = path.relative(root, abs);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return `${target} leaves the repository`;
  const inRepo = rel === '' || tracked.has(rel) || [...tracked].some((f) => f.startsWith(`${rel}/`));
  if (!inRepo) return `${target}: no ${rel} in the repository (git ls-files)`;
  if (anchor === undefined) return undefined;
  if (!abs.endsWith('.md')) return undefined;
  if (!anchors(fs.readFileSync(abs, 'utf8')).has(anchor)) return `${target}: no heading makes #${anchor} in ${rel}`;
  return undefined;
}
