import { X509Certificate, createHash, timingSafeEqual } from 'node:crypto';

/**
 * The join token, one format for the server that writes it and the agent that reads it.
 * Like k3s's secure token: `K10<sha256 of the CA certificate's DER, hex>::<secret>`. The
 * pin lets an agent check, before it sends the secret, that it talks to the server whose
 * CA the token names; the secret is what the server checks. A token without the `K10`
 * prefix is the secret alone (no pin), which an agent only accepts together with a CA file.
 */

const FULL = /^K10([0-9a-f]{64})::(.+)$/;

/** A join token split into what the agent sends (`secret`) and what it checks (`caHash`). */
export interface JoinToken {
  secret: string;
  /** The pinned CA's SHA-256 in lowercase hex; absent for a bare secret. */
  caHash?: string;
}

/** The SHA-256 of a PEM certificate's DER, lowercase hex: what a join token pins. */
export function caFingerprint(caPem: string): string {
  return createHash('sha256').update(new X509Certificate(caPem).raw).digest('hex');
}

/** The full join token: the secret pinned to the CA. The one place it is rendered. */
export function fullJoinToken(secret: string, caPem: string): string {
  return `K10${caFingerprint(caPem)}::${secret}`;
}

/** Splits a join token; anything that is not a full token is a bare secret. */
export function parseJoinToken(token: string): JoinToken {
  const t = token.trim();
  const m = FULL.exec(t);
  return m ? { secret: m[2]!, caHash: m[1]! } : { secret: t };
}

/** Whether `caPem` is the CA `caHash` pins, compared in constant time. */
export function pinMatches(caHash: string, caPem: string): boolean {
  const seen = Buffer.from(caFingerprint(caPem), 'hex');
  const want = Buffer.from(caHash, 'hex');
  return want.length === seen.length && timingSafeEqual(want, seen);
}

/**
 * What to do about a TLS failure, by Node's error code, for the one line an agent or
 * ctl prints; undefined when the code is not about TLS. `caFlag` is how that program
 * is given a CA.
 */
export function tlsFailureHint(code: string | undefined, server: string, caFlag: string): string | undefined {
  let host = server;
  try {
    host = new URL(server).hostname;
  } catch {
    /* keep the address as given */
  }
  switch (code) {
    case 'ERR_TLS_CERT_ALTNAME_INVALID':
      return `the server's certificate does not name ${host}: restart llmgw-server with --tls-san ${host}, or use an address the certificate names`;
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'CERT_SIGNATURE_FAILURE':
      return `the server's certificate is not signed by the trusted CA (${code}): give the server's CA with ${caFlag} (<data-dir>/tls/ca.pem on the server)`;
    case 'CERT_HAS_EXPIRED':
    case 'CERT_NOT_YET_VALID':
      return `the server's certificate is not valid now (${code}): check both clocks; restarting llmgw-server reissues its generated certificate`;
    case 'ECONNRESET':
      // A TLS listener drops a plain HTTP request without an answer.
      return server.startsWith('http:') ? `${server} closed the connection (ECONNRESET): llmgw-server serves https:// unless started with --insecure-http; try ${server.replace(/^http:/, 'https:')}` : undefined;
    case 'EPROTO':
    case 'ERR_SSL_WRONG_VERSION_NUMBER':
      return `${server} does not speak TLS (${code}): use http:// only for a server started with --insecure-http`;
    default:
      return undefined;
  }
}
