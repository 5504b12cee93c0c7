import type { Logger } from 'pino';
import { parseAddr, type ListenerTls } from '../server.js';
import { adminTls, operatorPair, type AdminTls } from './tls.js';

export { adminTls, operatorPair, wantedSans, type AdminTls } from './tls.js';

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

/** Both listeners' TLS from the flags; throws a one-line error naming the flag at fault. */
export async function listenersTls(f: TlsFlags, log: Logger): Promise<{ admin?: AdminTls; client?: ListenerTls }> {
  let client: ListenerTls | undefined;
  if (f.clientTlsCert || f.clientTlsKey) {
    if (!f.clientTlsCert || !f.clientTlsKey) throw new Error('give both --client-tls-cert and --client-tls-key, or neither (the client listener then serves plain HTTP)');
    client = operatorPair(f.clientTlsCert, f.clientTlsKey, '--client-tls-cert/--client-tls-key');
  }
  if (f.insecureHttp) {
    if (f.tlsCert || f.tlsKey) throw new Error('--insecure-http and --tls-cert/--tls-key contradict each other: give one or the other');
    log.warn('--insecure-http: the admin listener serves plain HTTP; tokens and engine keys cross the network in clear text unless a proxy in front terminates TLS');
    return { ...(client ? { client } : {}) };
  }
  const admin = await adminTls(
    { dataDir: f.dataDir, listenHost: parseAddr(f.adminAddr).host, extraSans: f.tlsSan, ...(f.tlsCert ? { certFile: f.tlsCert } : {}), ...(f.tlsKey ? { keyFile: f.tlsKey } : {}) },
    log,
  );
  return { admin, ...(client ? { client } : {}) };
}
