import type { Logger } from 'pino';
import { adminTls, operatorPair, type AdminTls } from './tls.js';

export { adminTls, operatorPair, wantedSans, type AdminTls } from './tls.js';

/** A listener's certificate (chain) and private key, PEM. */
export interface ListenerTls {
  cert: string;
  key: string;
}

/** `127.0.0.1:8081` → host and port; `:8081` listens on every address. */
export function parseAddr(addr: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(addr.trim());
  if (!m) throw new Error(`invalid address "${addr}": want HOST:PORT, e.g. 127.0.0.1:8081`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port: Number(m[3]) };
}

/** The TLS flags of `llmgw-server`, as commander hands them over. */
export interface TlsFlags {
  adminAddr: string;
  dataDir: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsSan: string[];
  insecureHttp: boolean;
  clientTlsCert?: string;
  clientTlsKey?: string;
}

/**
 * What is wrong with the TLS flags taken together, before any file is read or written
 * (a usage error); undefined when nothing is.
 */
export function tlsFlagsProblem(f: Pick<TlsFlags, 'tlsCert' | 'tlsKey' | 'insecureHttp' | 'clientTlsCert' | 'clientTlsKey'>): string | undefined {
  if (Boolean(f.clientTlsCert) !== Boolean(f.clientTlsKey))
    return 'give both --client-tls-cert and --client-tls-key, or neither (the client listener then serves plain HTTP)';
  if (f.insecureHttp && (f.tlsCert || f.tlsKey)) return '--insecure-http and --tls-cert/--tls-key contradict each other: give one or the other';
  return undefined;
}

/** Both listeners' TLS from the flags; throws a one-line error naming the flag at fault. */
export async function listenersTls(f: TlsFlags, log: Logger): Promise<{ admin?: AdminTls; client?: ListenerTls }> {
  const problem = tlsFlagsProblem(f);
  if (problem !== undefined) throw new Error(problem);
  let client: ListenerTls | undefined;
  if (f.clientTlsCert && f.clientTlsKey) client = operatorPair(f.clientTlsCert, f.clientTlsKey, '--client-tls-cert/--client-tls-key');
  if (f.insecureHttp) {
    log.warn(
      '--insecure-http: the admin listener serves plain HTTP; tokens and engine keys cross the network in clear text unless a proxy in front terminates TLS',
    );
    return { ...(client ? { client } : {}) };
  }
  const admin = await adminTls(
    {
      dataDir: f.dataDir,
      listenHost: parseAddr(f.adminAddr).host,
      extraSans: f.tlsSan,
      ...(f.tlsCert ? { certFile: f.tlsCert } : {}),
      ...(f.tlsKey ? { keyFile: f.tlsKey } : {}),
    },
    log,
  );
  return { admin, ...(client ? { client } : {}) };
}
