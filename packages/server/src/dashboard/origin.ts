import type { Request } from 'express';

// Where a dashboard request comes from and may go back to: checks on headers a browser sets.

/** Whether the request reached us over HTTPS, directly or through a proxy that says so. */
export function isHttps(req: Request): boolean {
  return req.secure || (req.get('x-forwarded-proto') ?? '').split(',').at(0)?.trim().toLowerCase() === 'https';
}

/**
 * Whether a POST came from one of our own pages, by the headers browsers add and pages
 * cannot forge. Absent headers pass (old browsers, curl): the CSRF token still guards.
 */
export function sameOrigin(req: Request): boolean {
  const site = req.get('sec-fetch-site');
  if (site !== undefined && site !== 'same-origin') return false;
  const origin = req.get('origin');
  if (origin === undefined) return true;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return false; // includes the opaque origin "null"
  }
  const hosts = [req.get('host'), ...(req.get('x-forwarded-host') ?? '').split(',').map((h) => h.trim())].filter(Boolean);
  return hosts.includes(host);
}

/** Where to go after logging in: a path on this site only, never another origin. */
export function safeNext(v: unknown): string {
  if (typeof v !== 'string' || !v.startsWith('/') || v.startsWith('//') || v.includes('\\') || hasControlChar(v) || v.startsWith('/login')) return '/';
  return v;
}

/** A control character in a redirect target could split a header or hide a scheme. */
function hasControlChar(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) < 0x20) return true;
  return false;
}
