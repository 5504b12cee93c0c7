/**
 * Command-line settings declared once, in a table: each entry's flag, unit, default,
 * bounds and help, from which the options of a commander command, one validation with
 * a message naming the flag (or variable), the unit and the bound, and the typed values
 * (seconds already in ms) are derived. The server and the agent each keep their table.
 *
 * The commander types are structural ({@link SettingsCommand}) so this package needs no
 * commander of its own: a `Command` of commander 14 fits them.
 */
import { flagOrEnv } from './switches.js';

/**
 * What a measured setting is in on the command line: it names the placeholder in
 * `--help`, the message of a refused value, and (seconds) the conversion to ms.
 */
export type Unit = 'seconds' | 'count' | 'bytes' | 'tokens' | 'fraction';

/** A number with a unit and bounds; its typed value is in ms when the unit is seconds. */
export interface MeasuredSetting {
  unit: Unit;
  flag: `--${string}`;
  /** In the unit of the flag (seconds, not ms). */
  default: number;
  /** Bounds, each optional: the value must be > `above`, >= `atLeast`, <= `atMost`. */
  above?: number;
  atLeast?: number;
  atMost?: number;
  help: string;
}

/** A string taken as given (an address, a path, a URL), or one of `choices`. */
export interface TextSetting {
  unit: 'text';
  flag: `--${string}`;
  placeholder: string;
  default?: string;
  choices?: readonly string[];
  help: string;
}

/** On when the flag is given, else as its variable says (strictly: see `parseSwitch`). */
export interface SwitchSetting {
  unit: 'switch';
  flag: `--${string}`;
  help: string;
}

/**
 * Values of a repeatable flag, in order; `commas` also splits each at commas. The
 * variable (unless `env: false`) gives the first value.
 */
export interface ListSetting {
  unit: 'list';
  flag: `--${string}`;
  placeholder: string;
  commas: boolean;
  env?: false;
  help: string;
}

export type Setting = MeasuredSetting | TextSetting | SwitchSetting | ListSetting;
export type SettingsTable = Record<string, Setting>;

type ValueOf<S> = S extends { unit: 'text'; choices: readonly (infer C)[] }
  ? C
  : S extends { unit: 'text'; default: string }
    ? string
    : S extends { unit: 'text' }
      ? string | undefined
      : S extends { unit: 'switch' }
        ? boolean
        : S extends { unit: 'list' }
          ? string[]
          : number;

/** Every setting of table `T`, validated: numbers within their bounds, seconds already in ms. */
export type SettingsOf<T extends SettingsTable> = { -readonly [K in keyof T]: ValueOf<T[K]> };

/** The measured settings of table `T` (numbers, seconds in ms). */
export type MeasuredOf<T extends SettingsTable> = { -readonly [K in keyof T as T[K] extends MeasuredSetting ? K : never]: number };

/** What of a commander `Option` a table's options need. */
export interface SettingsOption {
  env(name: string): SettingsOption;
  default(value: unknown, description?: string): SettingsOption;
  choices(values: readonly string[]): SettingsOption;
  argParser(fn: (value: string, previous: string[]) => string[]): SettingsOption;
  attributeName(): string;
}

/** What of a commander `Command` a table's options need. */
export interface SettingsCommand {
  createOption(flags: string, description?: string): SettingsOption;
  addOption(option: SettingsOption): unknown;
  opts(): Record<string, unknown>;
  getOptionValueSource(key: string): string | undefined;
}

/** The environment variable of a flag: `--lost-after` → `LLMGW_LOST_AFTER`. */
export function envOf(flag: string): string {
  return `LLMGW_${flag.slice(2).toUpperCase().replace(/-/g, '_')}`;
}

export function isMeasured(s: Setting): s is MeasuredSetting {
  return s.unit !== 'text' && s.unit !== 'switch' && s.unit !== 'list';
}

const PLACEHOLDERS: Record<Unit, string> = { seconds: 'seconds', count: 'n', bytes: 'bytes', tokens: 'tokens', fraction: '0..1' };
const WHAT: Record<Unit, string> = {
  seconds: 'a number of seconds',
  count: 'a whole number',
  bytes: 'a whole number of bytes',
  tokens: 'a whole number of tokens',
  fraction: 'a fraction',
};

/** `a number of seconds > 0`: what a measured setting must be, for its message. */
export function describeBounds(s: MeasuredSetting): string {
  const bounds = [
    ...(s.above !== undefined ? [`> ${s.above}`] : []),
    ...(s.atLeast !== undefined ? [`>= ${s.atLeast}`] : []),
    ...(s.atMost !== undefined ? [`<= ${s.atMost}`] : []),
  ];
  return `${WHAT[s.unit]} ${bounds.join(' and ')}`;
}

/** A measured value as given, in the setting's unit, into its typed value; throws the one-line reason it is refused. */
export function readMeasured(s: MeasuredSetting, raw: string, from: string = s.flag): number {
  const n = Number(raw);
  const whole = s.unit !== 'seconds' && s.unit !== 'fraction';
  const ok =
    // Number('') is 0, so a blank value would pass as 0 where 0 is allowed.
    raw.trim() !== '' &&
    // Infinity would pass "> 0", and a timer of Infinity fires at once.
    Number.isFinite(n) &&
    (!whole || Number.isInteger(n)) &&
    (s.above === undefined || n > s.above) &&
    (s.atLeast === undefined || n >= s.atLeast) &&
    (s.atMost === undefined || n <= s.atMost);
  if (!ok) throw new Error(`${from} must be ${describeBounds(s)}, got '${raw}'`);
  return s.unit === 'seconds' ? n * 1000 : n;
}

/** The commander option of one setting, made by `cmd`; `help` replaces its text (a subcommand that shares it). */
export function settingOption(cmd: SettingsCommand, s: Setting, help: string = s.help): SettingsOption {
  switch (s.unit) {
    case 'switch':
      // Not commander's .env(): it would turn the flag on for LLMGW_X=0.
      return cmd.createOption(s.flag, `${help} (or ${envOf(s.flag)}=1; 0/false/no/off is off)`);
    case 'list': {
      const o = cmd
        .createOption(`${s.flag} <${s.placeholder}>`, help)
        .argParser((v, previous) => [
          ...previous,
          ...(s.commas
            ? v
                .split(',')
                .map((p) => p.trim())
                .filter(Boolean)
            : [v]),
        ])
        .default([]);
      return s.env === false ? o : o.env(envOf(s.flag));
    }
    case 'text': {
      const o = cmd.createOption(`${s.flag} <${s.placeholder}>`, help).env(envOf(s.flag));
      if (s.choices) o.choices(s.choices);
      return s.default === undefined ? o : o.default(s.default);
    }
    default: {
      const mib = s.unit === 'bytes' && s.default % 2 ** 20 === 0 ? ` (${s.default / 2 ** 20} MiB)` : '';
      return cmd.createOption(`${s.flag} <${PLACEHOLDERS[s.unit]}>`, help).env(envOf(s.flag)).default(String(s.default), `${s.default}${mib}`);
    }
  }
}

/** Adds every setting of `table` to `cmd` as an option, in the table's order. */
export function addSettings<C extends SettingsCommand>(cmd: C, table: SettingsTable): C {
  for (const s of Object.values(table)) cmd.addOption(settingOption(cmd, s));
  return cmd;
}

/**
 * Every setting of `table` from the parsed `cmd`, validated; throws the first refused
 * one's message, which names the variable when the value came from it.
 */
export function readSettings<T extends SettingsTable>(cmd: SettingsCommand, table: T, env: Record<string, string | undefined> = process.env): SettingsOf<T> {
  const values = cmd.opts();
  const out: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(table)) {
    const key = settingOption(cmd, s).attributeName();
    const value = values[key];
    if (s.unit === 'switch') out[name] = flagOrEnv(value === true ? true : undefined, envOf(s.flag), env);
    else if (!isMeasured(s)) out[name] = value;
    else out[name] = readMeasured(s, String(value), cmd.getOptionValueSource(key) === 'env' ? envOf(s.flag) : s.flag);
  }
  return out as SettingsOf<T>;
}

/** The measured settings of `values` (read from `table`), e.g. to pass on as they are. */
export function measuredOf<T extends SettingsTable>(table: T, values: SettingsOf<T>): MeasuredOf<T> {
  const out: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(table)) if (isMeasured(s)) out[name] = values[name];
  return out as MeasuredOf<T>;
}

/** Every measured setting of `table` at its default, in ms where the flag takes seconds. */
export function measuredDefaults<T extends SettingsTable>(table: T): MeasuredOf<T> {
  const out: Record<string, number> = {};
  for (const [name, s] of Object.entries(table)) if (isMeasured(s)) out[name] = readMeasured(s, String(s.default));
  return out as MeasuredOf<T>;
}
