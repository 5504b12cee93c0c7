import fs from 'node:fs';

/** Extra request headers per host, for private model stores (`--source-header`). */
export type SourceHeaders = Map<string, Record<string, string>>;

/**
 * Parses `--source-header` values, each `HOST=Name: value`: `Name: value` is sent with
 * every model file request to HOST (a host name, with `:port` when not the default). A
 * value `@FILE` is read from FILE (trimmed) when the agent starts, so a token stays out
 * of `ps` and the unit file: `--source-header 'models.example.com=Authorization: @/etc/llmgw/models-token'`
 * with the file holding `Bearer …`. Throws naming the value at fault, its header value masked.
 */
export function parseSourceHeaders(values: readonly string[], readFile: (f: string) => string = (f) => fs.readFileSync(f, 'utf8')): SourceHeaders {
  const out: SourceHeaders = new Map();
  for (const v of values) {
    const m = /^([^=\s]+)=([!#$%&'*+.^_`|~0-9A-Za-z-]+):\s*(.*)$/.exec(v);
    if (!m?.[1] || !m[2] || m[3] === undefined)
      throw new Error(`invalid --source-header "${shown(v)}": want HOST=Name: value, e.g. models.example.com=Authorization: @/etc/llmgw/models-token`);
    let value = m[3].trim();
    if (value.startsWith('@')) {
      const file = value.slice(1);
      try {
        value = readFile(file).trim();
      } catch (err) {
        throw new Error(`invalid --source-header for ${m[1]}: cannot read ${file}: ${(err as Error).message}`, { cause: err });
      }
    }
    if (!value || /[\r\n]/.test(value)) throw new Error(`invalid --source-header for ${m[1]}: the value of ${m[2]} is empty or spans lines`);
    const host = m[1].toLowerCase();
    out.set(host, { ...out.get(host), [m[2].toLowerCase()]: value });
  }
  return out;
}

/**
 * A malformed value as an error may show it: the host and the header's name, up to the
 * first ':' after the '=' (else up to the '='), the rest masked, since it may be a token.
 */
function shown(v: string): string {
  const eq = v.indexOf('=');
  const colon = v.indexOf(':', eq + 1);
  const at = colon >= 0 ? colon + 1 : eq + 1;
  return at < v.length ? `${v.slice(0, at)}${at > 0 ? ' ' : ''}…` : v;
}

/** The headers for a request to `url`: those of its host (`host` or `host:port`). */
export function headersFor(headers: SourceHeaders, url: URL): Record<string, string> {
  return { ...headers.get(url.hostname.toLowerCase()), ...headers.get(url.host.toLowerCase()) };
}
