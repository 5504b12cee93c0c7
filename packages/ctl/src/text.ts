// Text helpers without chalk or cli-table3, for what every command loads before it runs
// (render.ts holds the tables and colours, loaded by the commands that print them).

/**
 * JSON for the terminal or a pipe: JSON.stringify already escapes C0 controls in
 * strings; DEL and the C1 range (0x9b is CSI to some terminals) are escaped too, still JSON.
 */
export function safeJson(v: unknown, indent?: number): string {
  return JSON.stringify(v, null, indent).replace(/[\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** SGR sequences (colours), which chalk writes: the only escapes ctl itself prints. */
// eslint-disable-next-line no-control-regex -- matching ESC is the point
const SGR = /\x1b\[[0-9;]*m/y;

/**
 * Text for the operator's terminal: every control character except newline and tab is
 * shown escaped (`\x1b`, `\x07`, `\x9b`), so a hostname, label, GPU name, log line or
 * error a node or an engine reported cannot move the cursor, retitle the window or write
 * the clipboard (OSC 52). With `colour`, colour sequences stay (ctl's own, from chalk;
 * one in reported text can only colour it).
 */
export function terminalSafe(text: string, colour = false): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x1b && colour) {
      SGR.lastIndex = i;
      const m = SGR.exec(text);
      if (m) {
        out += m[0];
        i += m[0].length - 1;
        continue;
      }
    }
    const control = (c < 0x20 && c !== 0x0a && c !== 0x09) || (c >= 0x7f && c <= 0x9f);
    out += control ? `\\x${c.toString(16).padStart(2, '0')}` : text[i];
  }
  return out;
}
