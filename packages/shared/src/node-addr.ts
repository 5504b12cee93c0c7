import { BlockList, isIP, isIPv6 } from 'node:net';
import { isLoopbackHost } from './loopback.js';

/**
 * What a node's `mgmt_addr` may be. The gateway sends clients' prompts to
 * `http://MGMT_ADDR:PORT`, so an address a report names is where prompts go: never the
 * cloud metadata service (169.254.169.254), "any address" (0.0.0.0 reaches this very
 * machine), a multicast or broadcast group, nor a name the URL parser and getaddrinfo
 * read as a number (`2130706433`, `0x7f000001`, `127.1`, `0177.0.0.1`: each 127.0.0.1).
 * Loopback is refused too unless the server allows it ({@link nodeAddrRefusal}).
 */

function list(entries: [string, number, 'ipv4' | 'ipv6'][]): BlockList {
  const b = new BlockList();
  for (const [net, prefix, type] of entries) b.addSubnet(net, prefix, type);
  return b;
}

// IPv4 subnets match IPv4-mapped IPv6 too (`::ffff:169.254.169.254`): BlockList maps them.
const REFUSED: [string, BlockList][] = [
  [
    'is unspecified ("any address": this very machine)',
    list([
      ['0.0.0.0', 8, 'ipv4'],
      ['::', 128, 'ipv6'],
    ]),
  ],
  [
    'is link-local (169.254.0.0/16, fe80::/10: the cloud metadata service lives there)',
    list([
      ['169.254.0.0', 16, 'ipv4'],
      ['fe80::', 10, 'ipv6'],
    ]),
  ],
  [
    'is multicast or broadcast, not one machine',
    list([
      ['224.0.0.0', 4, 'ipv4'],
      ['240.0.0.0', 4, 'ipv4'],
      ['ff00::', 8, 'ipv6'],
    ]),
  ],
  // ::a.b.c.d, deprecated "IPv4-compatible" addresses: a spelling, not a node (::1 is checked first).
  ['is an IPv4-compatible IPv6 address (::a.b.c.d): write the IPv4 address itself', list([['::', 96, 'ipv6']])],
];

/** The last label of a name the WHATWG URL parser takes for an IPv4 number (decimal, 0x hex, or octal). */
const NUMERIC_LABEL = /^(?:0x[0-9a-f]*|[0-9]+)$/i;

/**
 * Whether `addr` names this machine: a loopback address in any spelling
 * ({@link isLoopbackHost}), `localhost` or a name under `.localhost` (RFC 6761: always loopback).
 */
export function isLoopbackAddr(addr: string): boolean {
  const a = addr.toLowerCase().replace(/\.$/, '');
  return isLoopbackHost(a) || a.endsWith('.localhost');
}

/**
 * Why `addr` cannot be a node's `mgmt_addr`, or undefined when it can: a unicast IP
 * address or a host name. `allowLoopback`: a single-machine fleet, where the engines are
 * on the server's machine. Host names are taken as written: what they resolve to is the
 * name's owner's (DNS) to decide, and a name with a numeric last label is refused as the
 * number it would be read as.
 */
export function nodeAddrRefusal(addr: string, allowLoopback: boolean): string | undefined {
  // Every heartbeat asks, almost always of the address its node gave last time, and the
  // subnet checks build an address object per list: remembered, an answer costs a lookup.
  const memo = allowLoopback ? MEMO_LOOPBACK_OK : MEMO;
  const known = memo.get(addr);
  if (known !== undefined) return known || undefined;
  const why = refusalOf(addr, allowLoopback);
  // Bounded: forgetting everything now and then costs one recomputation per node.
  if (memo.size >= MEMO_MAX) memo.clear();
  memo.set(addr, why ?? '');
  return why;
}

/** Answers of {@link nodeAddrRefusal} by address, '' for none; one map per `allowLoopback`. */
const MEMO = new Map<string, string>();
const MEMO_LOOPBACK_OK = new Map<string, string>();
const MEMO_MAX = 50_000;

function refusalOf(addr: string, allowLoopback: boolean): string | undefined {
  if (isLoopbackAddr(addr)) {
    return allowLoopback
      ? undefined
      : 'is loopback, this server’s own machine: a node must report an address the server reaches it at (start the server with --allow-loopback-nodes for a single-machine fleet)';
  }
  const family = isIP(addr);
  if (family === 0) {
    const last = addr.replace(/\.$/, '').split('.').pop() ?? '';
    if (NUMERIC_LABEL.test(last))
      return 'is a number in a host name’s place (2130706433, 0x7f000001 and 127.1 all mean 127.0.0.1): write a dotted IPv4 address or a name';
    return undefined;
  }
  const type = isIPv6(addr) ? 'ipv6' : 'ipv4';
  for (const [why, blocks] of REFUSED) if (blocks.check(addr, type)) return why;
  return undefined;
}

/** The kinds of address a model download's redirect may not reach unless its catalog URL does. */
export type AddressClass = 'loopback' | 'link-local' | 'private' | 'unspecified' | 'public';

const CLASSES: [Exclude<AddressClass, 'public'>, BlockList][] = [
  [
    'loopback',
    list([
      ['127.0.0.0', 8, 'ipv4'],
      ['::1', 128, 'ipv6'],
    ]),
  ],
  [
    'link-local',
    list([
      ['169.254.0.0', 16, 'ipv4'],
      ['fe80::', 10, 'ipv6'],
    ]),
  ],
  [
    'unspecified',
    list([
      ['0.0.0.0', 8, 'ipv4'],
      ['::', 128, 'ipv6'],
    ]),
  ],
  [
    // RFC 1918, shared address space (carrier NAT, 100.64/10), unique local IPv6, and the
    // deprecated site-local and IPv4-compatible forms, which reach nothing public.
    'private',
    list([
      ['10.0.0.0', 8, 'ipv4'],
      ['172.16.0.0', 12, 'ipv4'],
      ['192.168.0.0', 16, 'ipv4'],
      ['100.64.0.0', 10, 'ipv4'],
      ['fc00::', 7, 'ipv6'],
      ['fec0::', 10, 'ipv6'],
      ['::', 96, 'ipv6'],
    ]),
  ],
];

/** Which kind of address `ip` (an IP address, IPv4-mapped forms included) is; `public` for anything else. */
export function addressClass(ip: string): AddressClass {
  const a = ip.replace(/^\[(.*)\]$/, '$1');
  const type = isIPv6(a) ? 'ipv6' : 'ipv4';
  if (isIP(a) === 0) return 'public';
  for (const [c, blocks] of CLASSES) if (blocks.check(a, type)) return c;
  return 'public';
}
