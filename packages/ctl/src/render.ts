import { Chalk, type ChalkInstance } from 'chalk';
import Table from 'cli-table3';

/** Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org). */
export function colours(stream: NodeJS.WriteStream = process.stdout): ChalkInstance {
  const on = stream.isTTY && !('NO_COLOR' in process.env && process.env.NO_COLOR !== '') && process.env.TERM !== 'dumb';
  return new Chalk({ level: on ? 1 : 0 });
}

/** A kubectl-style table: no borders, two spaces between columns, upper-case headers. */
export function table(head: string[], rows: (string | number)[][]): string {
  const t = new Table({
    head,
    chars: {
      top: '',
      'top-mid': '',
      'top-left': '',
      'top-right': '',
      bottom: '',
      'bottom-mid': '',
      'bottom-left': '',
      'bottom-right': '',
      left: '',
      'left-mid': '',
      mid: '',
      'mid-mid': '',
      right: '',
      'right-mid': '',
      middle: '  ',
    },
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0 },
  });
  for (const r of rows) t.push(r.map(String));
  return t
    .toString()
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n');
}

export { safeJson, terminalSafe } from './text.js';
