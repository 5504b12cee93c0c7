/**
 * What to do about a TLS failure, by Node's error code, for the one line an agent or
 * ctl prints, naming the `server` URL (a machine may reach another llmgw than it meant);
 * undefined when the code is not about TLS. `caFlag` is how that program is given a CA.
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
      return `the certificate of ${server} does not name ${host}: restart llmgw-server with --tls-san ${host}, or use an address the certificate names`;
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'CERT_SIGNATURE_FAILURE':
      return `the certificate of ${server} is not signed by the trusted CA (${code}): if that is the llmgw server you mean, give its CA with ${caFlag} (<data-dir>/tls/ca.pem on the server)`;
    case 'CERT_HAS_EXPIRED':
    case 'CERT_NOT_YET_VALID':
      return `the certificate of ${server} is not valid now (${code}): check both clocks; restarting llmgw-server reissues its generated certificate`;
    case 'ECONNRESET':
      // A TLS listener drops a plain HTTP request without an answer.
      return server.startsWith('http:')
        ? `${server} closed the connection (ECONNRESET): llmgw-server serves https:// unless started with --insecure-http; try ${server.replace(/^http:/, 'https:')}`
        : undefined;
    case 'EPROTO':
    case 'ERR_SSL_WRONG_VERSION_NUMBER':
      return `${server} does not speak TLS (${code}): use http:// only for a server started with --insecure-http`;
    default:
      return undefined;
  }
}
