import { describe, expect, it } from '@jest/globals';
import { Chalk } from 'chalk';
import { safeJson, terminalSafe } from './render.js';

// What the adversarial pass wrote into a hostname: OSC 52 sets the clipboard, then a bell.
const OSC52 = 'gpu-1\x1b]52;c;cm0gLXJmIH4=\x07';

describe('terminal safety (issue 27: node-reported fields reached the terminal raw)', () => {
  it('shows every control character escaped, keeping newlines and tabs', () => {
    expect(terminalSafe(OSC52)).toBe('gpu-1\\x1b]52;c;cm0gLXJmIH4=\\x07');
    expect(terminalSafe('a\tb\nc\rd\x9b2J\x7f')).toBe('a\tb\nc\\x0dd\\x9b2J\\x7f');
  });

  it('keeps colour sequences only when asked (a terminal), and nothing else that starts with ESC', () => {
    const green = new Chalk({ level: 1 }).green('ready');
    expect(terminalSafe(`${green} ${OSC52}`, true)).toBe(`${green} gpu-1\\x1b]52;c;cm0gLXJmIH4=\\x07`);
    expect(terminalSafe(green)).toBe('\\x1b[32mready\\x1b[39m');
    expect(terminalSafe('\x1b[2J', true)).toBe('\\x1b[2J');
  });

  it('writes JSON that parses back to the same value, with C1 characters escaped', () => {
    const v = { hostname: `${OSC52}\x9b` };
    const text = safeJson(v, 2);
    expect([...text].filter((c) => (c.charCodeAt(0) < 0x20 ? c !== '\n' : c.charCodeAt(0) >= 0x7f && c.charCodeAt(0) <= 0x9f))).toEqual([]);
    expect(JSON.parse(text)).toEqual(v);
  });
});
