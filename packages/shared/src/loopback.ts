import { isIPv4, isIPv6 } from 'node:net';

/**
 * Whether a URL's host names this machine: `localhost`, an IPv4 address in 127.0.0.0/8,
 * or `::1` (bracketed or not, in any spelling, or an IPv4-mapped 127.x). An address,
 * never a name prefix: `127.attacker.example` is another machine, and plain HTTP to it
 * would carry the join and admin tokens in clear.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (h === 'localhost') return true;
  if (isIPv4(h)) return h.startsWith('127.');
  if (!isIPv6(h)) return false;
  // The URL parser's canonical form: `::1`, and `::ffff:7fxx:xxxx` for a mapped 127.x.
  const canonical = new URL(`http://[${h}]/`).hostname;
  return canonical === '[::1]' || /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(canonical);
}
