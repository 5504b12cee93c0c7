import dns from 'node:dns/promises';
import { isIP } from 'node:net';
import { addressClass, type AddressClass } from '@llmgw/shared';

/** A redirect the guard refused: final, the download does not try again. */
export class RedirectRefused extends Error {}

/** How host names are resolved (passed in so tests can answer for names like `*.invalid`). */
export type Lookup = (host: string) => Promise<string[]>;

const systemLookup: Lookup = async (host) => (await dns.lookup(host, { all: true })).map((a) => a.address);

/**
 * The kinds of address `host` is or resolves to. A name that does not resolve here counts
 * as public: behind a proxy the agent may not resolve names at all, and the proxy does.
 */
export async function hostClasses(host: string, lookup: Lookup = systemLookup): Promise<Set<AddressClass>> {
  const h = host.replace(/^\[(.*)\]$/, '$1');
  if (isIP(h) !== 0) return new Set([addressClass(h)]);
  if (h.toLowerCase() === 'localhost' || h.toLowerCase().endsWith('.localhost')) return new Set(['loopback']);
  let addrs: string[];
  try {
    addrs = await lookup(h);
  } catch {
    return new Set(['public']);
  }
  return new Set(addrs.length ? addrs.map(addressClass) : ['public']);
}

/**
 * A got `beforeRedirect` hook for a download of `catalogUrl`: a redirect to a loopback,
 * link-local, private or unspecified address is refused unless the catalog's own URL is
 * such an address too (an internal mirror may send the agent to another internal host;
 * a public file server may not send it to 169.254.169.254, this machine's ports or the
 * LAN: finding 7 of issue 27). Checked before the redirected request goes out, names
 * resolved here; an answer that changes between this lookup and got's own (DNS
 * rebinding) is not caught.
 */
export function redirectGuard(catalogUrl: string, lookup: Lookup = systemLookup): (o: { url?: string | URL | undefined }) => Promise<void> {
  let named: Promise<Set<AddressClass>> | undefined;
  return async (o) => {
    const to = o.url instanceof URL ? o.url : new URL(String(o.url));
    named ??= hostClasses(new URL(catalogUrl).hostname, lookup);
    const allowed = await named;
    for (const c of await hostClasses(to.hostname, lookup)) {
      if (c !== 'public' && !allowed.has(c))
        throw new RedirectRefused(
          `cannot fetch ${new URL(catalogUrl).origin}: it redirects to ${to.origin}, a ${c} address the catalog does not name; name that host in the catalog's URL if it is meant`,
        );
    }
  };
}
