/**
 * The README as a test reads it: the shell examples marked `<!-- readme-test -->`, and
 * the placeholder rules by which an example's shown output matches a live run. No
 * processes here; readme.test.ts runs the examples, docs.test.ts checks these rules and
 * the links.
 *
 * A marked block is the fenced block right after the marker line:
 * - ```console: `$ cmd` lines, each followed by the output it prints (stdout and stderr
 *   together, as a terminal shows them), up to the next `$ ` line;
 * - ```sh: one command a line (a trailing `\` continues it), output not shown.
 * A command exits 0 unless its trailing comment says `# exit N`.
 */

export const MARKER = '<!-- readme-test -->';

export interface Example {
  /** The `## ` section the example is in. */
  section: string;
  /** 1-based line of the `$ cmd` (or the sh line) in the file. */
  line: number;
  command: string;
  exit: number;
  /** The output lines shown; undefined in an sh block (not compared). */
  output?: string[];
}

/** Every command of every marked block, in the order of the file. */
export function examples(markdown: string): Example[] {
  const lines = markdown.split('\n');
  const out: Example[] = [];
  let section = '';
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    if (/^## /.test(l)) section = l.slice(3).trim();
    if (l.trim() !== MARKER) continue;
    const fence = /^(\s*)```(console|sh)\s*$/.exec(lines[i + 1] ?? '');
    if (!fence) throw new Error(`line ${i + 1}: ${MARKER} must be followed by a \`\`\`console or \`\`\`sh block`);
    const indent = fence[1]!.length;
    const body: { text: string; line: number }[] = [];
    let j = i + 2;
    for (; j < lines.length && lines[j]!.trim() !== '```'; j++) body.push({ text: lines[j]!.slice(indent), line: j + 1 });
    if (j === lines.length) throw new Error(`line ${i + 2}: the block never closes`);
    out.push(...(fence[2] === 'console' ? consoleBlock(body, section) : shBlock(body, section)));
    i = j;
  }
  return out;
}

/** A command's lines joined at trailing backslashes, from `body[k]`; returns the next index. */
function command(body: { text: string }[], k: number, first: string): { command: string; next: number } {
  let cmd = first;
  while (/\\$/.test(cmd) && k + 1 < body.length) cmd += `\n${body[++k]!.text}`;
  return { command: cmd, next: k + 1 };
}

const exitOf = (cmd: string): number => Number(/#[^'"\n]*\bexit (\d+)\b[^'"\n]*$/.exec(cmd)?.[1] ?? 0);

function consoleBlock(body: { text: string; line: number }[], section: string): Example[] {
  const out: Example[] = [];
  let k = 0;
  if (body.length && !body[0]!.text.startsWith('$ ')) throw new Error(`line ${body[0]!.line}: a console block starts with a \`$ \` command`);
  while (k < body.length) {
    const start = body[k]!;
    const c = command(body, k, start.text.slice(2));
    const output: string[] = [];
    for (k = c.next; k < body.length && !body[k]!.text.startsWith('$ '); k++) output.push(body[k]!.text);
    out.push({ section, line: start.line, command: c.command, exit: exitOf(c.command), output });
  }
  return out;
}

function shBlock(body: { text: string; line: number }[], section: string): Example[] {
  const out: Example[] = [];
  for (let k = 0; k < body.length;) {
    const t = body[k]!.text;
    if (!t.trim() || t.trim().startsWith('#')) {
      k++;
      continue;
    }
    const c = command(body, k, t);
    out.push({ section, line: body[k]!.line, command: c.command, exit: exitOf(c.command) });
    k = c.next;
  }
  return out;
}

/**
 * What may differ between the README's output and a live run, each matching only its own
 * shape (documented in packages/e2e/README.md):
 * - `…` inside a line: any text; a line that is only `…`: any number of lines;
 * - an id (`r-`, `key-`, `tok-` and 8 hex digits): any id of that kind;
 * - an age or duration (`37s`, `12m`, `2h`, `3d`): any;
 * - a version (`0.1.0`, `v20.20.2`): any;
 * - a timestamp (`2026-12-01T15:00:30.896Z`, `14:03:05`): any;
 * - `pid 4242`: any pid; an engine's port (40000–40999): any port in that range;
 * - a run of two or more spaces (table columns): any run of two or more.
 * The live output is first rewritten from the instance's own values to the README's
 * (its ports to 8080/8081, its home to /home/me, its hostname to my-machine), by the test.
 */
const SHAPES: [RegExp, string][] = [
  [/…/g, '.*?'],
  [/\b(r|key|tok)-[0-9a-f]{8}\b/g, '$1-[0-9a-f]{8}'],
  [/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:\\.\\d+)?Z'],
  [/\b\d\d:\d\d:\d\d\b/g, '\\d\\d:\\d\\d:\\d\\d'],
  [/\bv?\d+\.\d+\.\d+\b/g, 'v?\\d+\\.\\d+\\.\\d+'],
  [/:40\d\d\d\b/g, ':40\\d\\d\\d'],
  [/(?<![\w.-])\d+[smhd]\b/g, '\\d+[smhd]'],
];

/**
 * Words whose live value later commands use: ids, an engine's address, and words with a
 * `…` (a secret) where the live value has none (a prefix cut short with `…` is no value
 * to type). An id once bound must be the same object wherever the README shows it again.
 */
const ID = /^(?:r|key|tok)-[0-9a-f]{8}$/;
const SECRET = /^[^\s…]+…[^\s…]*$/;
const ENGINE = /^https?:\/\/[^\s/]+:40\d\d\d$/;

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** One expected line as a regex; `words` lists, in order, the README words it captures. */
export function lineRegex(expected: string, bound: ReadonlyMap<string, string> = new Map()): { re: RegExp; words: string[] } {
  const words: string[] = [];
  const parts = expected.trimEnd().split(/( +)/);
  const src = parts.map((part, i) => {
    if (/^ +$/.test(part)) return part.length > 1 ? ' {2,}' : ' ';
    const pid = i >= 2 && /(^|\W)pid$/.test(parts[i - 2]!) ? /^\d+(.*)$/.exec(part) : null;
    if (pid) return `\\d+${escape(pid[1]!)}`;
    // A word with a `…` (a secret) or an engine's address is bound whole; otherwise each id in it is.
    const whole = SECRET.test(part) || ENGINE.test(part);
    let re = '';
    // Apply the shapes to the word left to right, escaping the literal text between them.
    let rest = part;
    while (rest) {
      let best: { at: number; text: string; repl: string } | undefined;
      for (const [shape, repl] of SHAPES) {
        const m = new RegExp(shape.source).exec(rest);
        if (m && (!best || m.index < best.at)) best = { at: m.index, text: m[0], repl: m[0].replace(new RegExp(shape.source), repl) };
      }
      if (!best) {
        re += escape(rest);
        break;
      }
      let piece = best.repl.replace(/\((?!\?)/g, '(?:');
      if (ID.test(best.text) && !whole) {
        const known = bound.get(best.text);
        if (known) piece = escape(known);
        else {
          words.push(best.text);
          piece = `(${piece})`;
        }
      }
      re += escape(rest.slice(0, best.at)) + piece;
      rest = rest.slice(best.at + best.text.length);
    }
    if (whole) {
      words.push(part);
      return `(${re})`;
    }
    return re;
  });
  return { re: new RegExp(`^${src.join('')}$`), words };
}

/**
 * Whether `actual` (lines, trailing spaces dropped) matches the README's `expected`
 * lines, ids already `bound` standing for their live values; on a match, the README
 * words and the live values they stood for (those of `bound` included).
 */
export function match(expected: string[], actual: string[], bound: ReadonlyMap<string, string> = new Map()): Map<string, string> | undefined {
  const exp = trimBlank(expected).map((l) => (l.trim() === '…' ? undefined : lineRegex(l, bound)));
  const act = trimBlank(actual.map((l) => l.trimEnd()));
  const go = (e: number, a: number, bound: Map<string, string>): Map<string, string> | undefined => {
    if (e === exp.length) return a === act.length ? bound : undefined;
    const x = exp[e];
    if (x === undefined) {
      for (let skip = a; skip <= act.length; skip++) {
        const r = go(e + 1, skip, bound);
        if (r) return r;
      }
      return undefined;
    }
    const m = a < act.length ? x.re.exec(act[a]!) : null;
    if (!m) return undefined;
    const next = new Map(bound);
    x.words.forEach((w, i) => {
      const v = m[i + 1]!;
      if (ID.test(w) || !v.includes('…')) next.set(w, v);
    });
    return go(e + 1, a + 1, next);
  };
  return go(0, 0, new Map(bound));
}

function trimBlank(lines: string[]): string[] {
  let s = 0;
  let e = lines.length;
  while (s < e && !lines[s]!.trim()) s++;
  while (e > s && !lines[e - 1]!.trim()) e--;
  return lines.slice(s, e);
}

/** `command` with each bound README word replaced by its live value (whole words only). */
export function substitute(command: string, bound: Map<string, string>): string {
  let out = command;
  for (const [word, value] of [...bound].sort((a, b) => b[0].length - a[0].length)) {
    out = out.replace(new RegExp(`(?<![\\w-])${escape(word)}(?![\\w-])`, 'g'), () => value);
  }
  return out;
}
