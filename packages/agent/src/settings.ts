import os from 'node:os';
import bytes from 'bytes';

/** `role=coding,zone=a` → `{role: 'coding', zone: 'a'}`; throws a one-line error on a bad pair. */
export function parseLabels(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`invalid label "${pair}": want key=value, e.g. --labels role=coding,zone=a`);
    out[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return out;
}

/** `40000-40999` → [40000, 40999]. */
export function parsePortRange(text: string): [number, number] {
  const m = /^(\d+)-(\d+)$/.exec(text.trim());
  const lo = m ? Number(m[1]) : NaN;
  const hi = m ? Number(m[2]) : NaN;
  if (!m || lo < 1 || hi > 65535 || lo > hi) throw new Error(`invalid port range "${text}": want LOW-HIGH, e.g. 40000-40999`);
  return [lo, hi];
}

/**
 * Node ids must be stable and URL-safe. The hostname is what operators recognise in
 * `ctl nodes`, so it is the default, normalised to the id alphabet.
 */
export function defaultNodeId(): string {
  return os.hostname().toLowerCase().replace(/[^a-z0-9._-]+/g, '-').replace(/^[^a-z0-9]+/, '') || 'node';
}

/**
 * The address the server reaches this node's engines at. A server on loopback means a
 * single-machine setup, so loopback is right; otherwise the first non-internal IPv4.
 */
export function defaultAdvertiseAddr(serverUrl: string): string {
  let host = '';
  try {
    host = new URL(serverUrl).hostname;
  } catch {
    /* validated elsewhere */
  }
  if (host === 'localhost' || host.startsWith('127.') || host === '[::1]') return '127.0.0.1';
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

/**
 * A size such as `50G`, `500MB` or `1.5T` in bytes (binary units, parsed by `bytes`,
 * which wants `GB`: a bare `G` is taken as `GB`, as `du -h` writes it). Throws on anything else.
 */
export function parseSize(flag: string, text: string): number {
  const t = text.trim().replace(/^([\d.]+)\s*([kmgtp])$/i, '$1$2B');
  const n = /^[\d.]+\s*[kmgtp]?b$/i.test(t) || /^\d+$/.test(t) ? bytes.parse(t) : null;
  if (n === null || !Number.isFinite(n) || n <= 0) throw new Error(`invalid ${flag} "${text}": want a size such as 50G, 500M or 2T`);
  return n;
}
