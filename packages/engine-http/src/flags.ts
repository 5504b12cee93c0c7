/**
 * An engine's flags declared once, in a table: each entry's flag, type, default, bounds
 * and help, from which the command line's parsing, its one-line refusals (naming the
 * flag) and `--help` are derived. The engines keep their tables; this file is the one
 * reader both use (engines never import each other).
 */
import { parseArgs } from 'node:util';
import { UsageError, type ParseResult } from './cli.js';

interface FlagBase {
  flag: `--${string}`;
  /** What `--help` shows after the flag: `N`, `HOST`. */
  placeholder: string;
  /** Refused when missing (and, for text, when empty), with `--X is required`. */
  required?: true;
  /** `--help`'s text; `\n` starts a new line, long lines are wrapped. */
  help: string;
  /** The `--help` section it is listed under (default `Options:`; required flags are under `Required:`). */
  section?: string;
}

/** A whole number in [min, max] (plain digits: `1e3`, `-1` and `''` are refused). */
export interface IntFlag extends FlagBase {
  type: 'int';
  min: number;
  max: number;
  default?: number;
}

/**
 * A string as given; `nonEmpty` refuses `''`. `repeatable`: every value given is kept, in
 * order, as a list (`--lora a=x --lora b=y`), instead of the last one winning.
 */
export interface TextFlag extends FlagBase {
  type: 'text';
  default?: string;
  nonEmpty?: true;
  repeatable?: true;
}

/** One of `choices`. */
export interface ChoiceFlag extends FlagBase {
  type: 'choice';
  choices: readonly string[];
  default?: string;
}

export type EngineFlag = IntFlag | TextFlag | ChoiceFlag;
export type FlagTable = Record<string, EngineFlag>;

type ValueOf<F> = F extends { repeatable: true }
  ? string[]
  : F extends { type: 'int' }
    ? F extends { default: number } | { required: true }
      ? number
      : number | null
    : F extends { type: 'choice'; choices: readonly (infer C)[] }
      ? F extends { default: string } | { required: true }
        ? C
        : C | null
      : F extends { default: string } | { required: true }
        ? string
        : string | null;

/** Every flag of table `T`, validated; a flag not given and without a default is null. */
export type FlagValues<T extends FlagTable> = { -readonly [K in keyof T]: ValueOf<T[K]> };

/** `'a' or 'b'`, or `one of a, b, c`: what a choice flag must be. */
function choicesText(choices: readonly string[]): string {
  return choices.length === 2 ? `'${choices[0]}' or '${choices[1]}'` : `one of ${choices.join(', ')}`;
}

/** One flag's value as typed into its value; throws the one-line {@link UsageError} that names the flag. */
export function readFlag(f: EngineFlag, raw: string): number | string {
  switch (f.type) {
    case 'int': {
      // Number('') is 0 and Number('1e3') is 1000; only plain digits are meant here.
      if (!/^\d+$/.test(raw)) throw new UsageError(`${f.flag} needs an integer, got '${raw}'`);
      const value = Number(raw);
      if (value < f.min || value > f.max) throw new UsageError(`${f.flag} must be between ${f.min} and ${f.max}, got ${raw}`);
      return value;
    }
    case 'choice':
      if (!f.choices.includes(raw)) throw new UsageError(`${f.flag} must be ${choicesText(f.choices)}, got '${raw}'`);
      return raw;
    case 'text':
      if (raw === '' && f.required) throw new UsageError(`${f.flag} is required`);
      if (raw === '' && f.nonEmpty) throw new UsageError(`${f.flag} must not be empty`);
      return raw;
  }
}

/**
 * An engine's argv (without node and the script) read by `table`: every flag takes a
 * value (`--name value` or `--name=value`; given twice, the last wins, unless the flag is
 * `repeatable`) and must be in the table; `-h`/`--help` anywhere before an error asks for
 * help. Never throws a UsageError.
 */
export function parseFlags<T extends FlagTable>(argv: readonly string[], table: T): ParseResult<FlagValues<T>> {
  const byName = new Map(Object.entries(table).map(([key, f]) => [f.flag.slice(2), { key, f }]));
  const given = new Map<string, string[]>();
  try {
    for (const token of tokensOf(argv, [...byName.keys()])) {
      if (token.kind === 'positional') throw new UsageError(`unexpected argument '${token.value}'`);
      // `--` ends the options for parseArgs; an engine has no positionals, so it is just not a flag.
      if (token.kind === 'option-terminator') throw new UsageError('unknown flag --');
      // What was typed: `-hx` is one token per letter, all of the same argument.
      const typed = argv[token.index] ?? '';
      if (typed === '-h' || typed === '--help') return { kind: 'help' };
      if (!typed.startsWith('--')) throw new UsageError(`unexpected argument '${typed}'`);
      if (!byName.has(token.name)) throw new UsageError(`unknown flag --${token.name}`);
      if (token.value === undefined) throw new UsageError(`--${token.name} needs a value`);
      given.set(token.name, [...(given.get(token.name) ?? []), token.value]);
    }
    const out: Record<string, unknown> = {};
    // In the table's order, so the first refused flag is the same whatever the argv's order.
    for (const [name, { key, f }] of byName) {
      const values = given.get(name);
      if (values === undefined && f.required) throw new UsageError(`${f.flag} is required`);
      if (f.type === 'text' && f.repeatable) out[key] = (values ?? []).map((v) => readFlag(f, v));
      else out[key] = values === undefined ? (f.default ?? null) : readFlag(f, values[values.length - 1]!);
    }
    return { kind: 'options', options: out as FlagValues<T> };
  } catch (e) {
    if (e instanceof UsageError) return { kind: 'error', message: e.message };
    throw e;
  }
}

/**
 * The value of `f` in a command line someone else runs (a profile's extra args), as the
 * engine would read it (the last one wins); undefined when not given or refused there.
 */
export function lastFlagValue(args: readonly string[], f: EngineFlag): number | string | undefined {
  let found: number | string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg !== f.flag && !arg.startsWith(`${f.flag}=`)) continue;
    const raw = arg === f.flag ? args[++i] : arg.slice(f.flag.length + 1);
    try {
      found = raw === undefined ? undefined : readFlag(f, raw);
    } catch {
      found = undefined;
    }
  }
  return found;
}

/**
 * `argv` in node:util's tokens, in order. Not strict: strict parseArgs refuses a value
 * that starts with a dash (`--api-key -k`, `--port -1`), where `--name value` takes the
 * next argument whatever it looks like, and its errors are not the engines' one-line
 * vocabulary; the checks are made on the tokens instead.
 */
function tokensOf(argv: readonly string[], names: readonly string[]) {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = Object.fromEntries(names.map((name) => [name, { type: 'string' }]));
  options.help = { type: 'boolean', short: 'h' };
  return parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true }).tokens;
}

const HELP_WIDTH = 88;

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  for (const paragraph of text.split('\n')) {
    // A paragraph's leading spaces indent its wrapped lines too (sub-items of a flag's help).
    const indent = /^ */.exec(paragraph)?.[0] ?? '';
    let line = '';
    for (const word of paragraph.trim().split(/\s+/)) {
      if (line !== '' && line.length + 1 + word.length > width) {
        lines.push(line);
        line = `${indent}  ${word}`;
      } else line = line === '' ? `${indent}${word}` : `${line} ${word}`;
    }
    lines.push(line);
  }
  return lines;
}

/** A flag's help text with its default, as `--help` shows it. */
function helpOf(f: EngineFlag): string {
  if (f.default === undefined) return f.help;
  const [first, ...rest] = f.help.split('\n');
  return [`${first} (default ${f.default})`, ...rest].join('\n');
}

/**
 * The flags part of `--help`, derived from `table`: `Required:`, then each section in
 * the order of its first flag, `-h, --help` closing `Options:`; defaults and wrapping
 * come from the table, so a flag cannot be missing from it or described twice.
 */
export function flagsHelp(table: FlagTable): string {
  const entries = Object.values(table);
  const label = (f: EngineFlag): string => `  ${f.flag} ${f.placeholder}`;
  const column = Math.max('  -h, --help'.length, ...entries.map((f) => label(f).length)) + 2;
  const sections = new Map<string, string[]>([
    ['Required:', []],
    ['Options:', []],
  ]);
  const line = (left: string, help: string): string[] =>
    wrap(help, HELP_WIDTH - column).map((text, i) => (i === 0 ? left.padEnd(column) : ' '.repeat(column)) + text);
  for (const f of entries) {
    const section = f.required ? 'Required:' : (f.section ?? 'Options:');
    if (!sections.has(section)) sections.set(section, []);
    sections.get(section)?.push(...line(label(f), helpOf(f)));
  }
  sections.get('Options:')?.push(...line('  -h, --help', 'show this help'));
  return [...sections]
    .filter(([, lines]) => lines.length > 0)
    .map(([title, lines]) => [title, ...lines].join('\n'))
    .join('\n\n');
}

/**
 * Values `f` must refuse, for tests that every flag of a table is validated: each side
 * of an int's bounds and a non-number, a choice not among its choices, an empty text
 * that must not be empty. Free text has none.
 */
export function refusedValues(f: EngineFlag): string[] {
  switch (f.type) {
    case 'int':
      return [...(f.min > 0 ? [String(f.min - 1)] : []), String(f.max + 1), '-1', '1.5', 'x', ''];
    case 'choice':
      return ['', `${f.choices[0]}x`];
    case 'text':
      return f.required || f.nonEmpty ? [''] : [];
  }
}
