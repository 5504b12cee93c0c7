import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import got, { HTTPError, RequestError, type Got } from 'got';
import type { Logger } from 'pino';
import { caFingerprint, isLoopbackHost, parseJoinToken, pinMatches, splitServerList } from '@llmgw/shared';
import { isDown } from './servers.js';

/**
 * What the agent trusts before it sends anything: the server's address, the join token's
 * pin and `--ca`. Like k3s: a full token's pin is checked against the CA the server
 * serves on `/cacerts` (fetched without verification, because nothing is trusted yet,
 * and without the secret), and then that CA is the only trust anchor of every request.
 * A bare secret needs `--ca`; nothing here ever falls back to trusting any certificate.
 */

export interface TrustInput {
  /** The server's addresses (`--server a,b`): instances of one control plane, which share one CA. */
  server: string | readonly string[];
  joinToken: string;
  /** `--ca` / `LLMGW_CA`: a PEM file with the server's CA. */
  caFile?: string;
  /** `--insecure-http`: plain HTTP to a non-loopback server is allowed. */
  insecureHttp: boolean;
}

/** The secret to send and the CA (PEM) to verify the server against; no CA over plain HTTP. */
export interface Trust {
  secret: string;
  ca?: string;
}

/** A reason not to connect at all: the agent says it in one line and exits. */
export class TrustError extends Error {}

const loopback = isLoopbackHost;

/**
 * Refuses plain HTTP to another machine unless `--insecure-http`: the join token and
 * engine keys would cross the network in clear text. Loopback never leaves the machine.
 */
export function checkServerUrl(server: string, insecureHttp: boolean): URL {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new TrustError(`invalid --server "${server}": want a URL like https://10.0.0.1:8081`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new TrustError(`invalid --server "${server}": want https:// (or http:// with --insecure-http)`);
  if (url.protocol === 'http:' && !insecureHttp && !loopback(url.hostname)) {
    throw new TrustError(
      `refusing plain http to ${url.host}: the join token would cross the network in clear text; use https://${url.host}, or --insecure-http when a proxy terminates TLS`,
    );
  }
  return url;
}

/** The one line of a pin mismatch: both fingerprints, and what to check. */
export function mismatch(server: string, expected: string, seen: string, where: string): string {
  return `the CA of ${server} (${where}) has SHA-256 ${seen}, but the join token pins ${expected}: not connecting; check --server and the token (llmgw-server join-token on the server prints it)`;
}

function readCa(file: string): string {
  try {
    const pem = fs.readFileSync(file, 'utf8');
    caFingerprint(pem);
    return pem;
  } catch (err) {
    throw new TrustError(`cannot read --ca ${file} as a PEM certificate: ${(err as Error).message}`);
  }
}

/**
 * The pin covers one certificate (the first, which is what `caFingerprint` hashes): any
 * other certificate in the same answer must not become a trust anchor too.
 */
function onlyFirst(pem: string): string {
  return new X509Certificate(pem).toString();
}

/** Past this, an unreachable server is no longer "starting": the agent warns once. */
const START_GRACE_MS = 30_000;

/**
 * Fetches `/cacerts` without verifying (and without credentials) from the first of
 * `servers` that answers, retrying while none does: every 250 ms at first, doubling up to
 * `retryMs`, because a server started at the same moment listens within a second or two.
 * That wait is said at info; a warning only once it has lasted `START_GRACE_MS`. Which
 * instance answers does not matter: they share one CA, and the pin is checked against it.
 */
async function fetchCa(servers: readonly string[], log: Logger, retryMs: number): Promise<{ server: string; pem: string }> {
  let said = false;
  let warned = false;
  const since = Date.now();
  let delay = Math.min(250, retryMs);
  const all = servers.join(', ');
  for (;;) {
    let code = '';
    for (const server of servers) {
      try {
        const pem = await got(`${server}/cacerts`, {
          https: { rejectUnauthorized: false },
          timeout: { connect: 5_000, request: 10_000 },
          retry: { limit: 0 },
        }).text();
        return { server, pem };
      } catch (err) {
        if (err instanceof HTTPError && !isDown(err)) {
          throw new TrustError(
            `the server at ${server} serves no CA at /cacerts (${err.response.statusCode}): is it an llmgw server over HTTPS? Give --ca FILE, or --insecure-http with an http:// address`,
          );
        }
        if (!(err instanceof RequestError)) throw err;
        code = err instanceof HTTPError ? String(err.response.statusCode) : err.code;
      }
    }
    if (!said) log.info({ server: all, code }, `waiting for the server at ${all} to answer (${code})`);
    said = true;
    if (!warned && Date.now() - since >= START_GRACE_MS) {
      log.warn(`cannot reach the server at ${all} to check its CA (${code}) for ${START_GRACE_MS / 1000} s: check --server / LLMGW_SERVER; still retrying`);
      warned = true;
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, retryMs);
  }
}

/**
 * The HTTP client for every call to the server once trust is settled: it verifies the
 * server against `ca` alone when there is one (the pinned or `--ca` CA), else the system's.
 */
export function serverClient(ca: string | undefined): Got {
  return ca ? got.extend({ https: { certificateAuthority: ca } }) : got;
}

/** Settles what to send and whom to trust, or throws a `TrustError` to stop the agent. */
/**
 * `--server`'s addresses, each checked (`checkServerUrl`): one bad address stops the agent
 * with a line naming it, rather than being skipped at every failover.
 */
export function checkServerList(server: string | readonly string[], insecureHttp: boolean): URL[] {
  const urls = typeof server === 'string' ? splitServerList(server) : server;
  if (urls.length === 0) throw new TrustError(`invalid --server "${String(server)}": want a URL like https://10.0.0.1:8081, or several separated by commas`);
  return urls.map((u) => checkServerUrl(u, insecureHttp));
}

export async function establishTrust(input: TrustInput, log: Logger, retryMs = 2000): Promise<Trust> {
  const urls = checkServerList(input.server, input.insecureHttp);
  const servers = typeof input.server === 'string' ? splitServerList(input.server) : input.server;
  const all = servers.join(', ');
  const token = parseJoinToken(input.joinToken);
  // A pasted token cut short is a full token gone wrong, not a bare secret: say what it is.
  if (token.badPin) throw new TrustError(`the join token is malformed: ${token.badPin}; copy it again whole (llmgw-server join-token on the server prints it)`);
  // Without https anywhere there is no certificate to pin (checkServerUrl allowed the http).
  if (urls.every((u) => u.protocol === 'http:')) return { secret: token.secret };
  if (input.caFile) {
    const ca = readCa(input.caFile);
    if (!token.caHash) return { secret: token.secret, ca };
    if (!pinMatches(token.caHash, ca)) throw new TrustError(mismatch(all, token.caHash, caFingerprint(ca), `--ca ${input.caFile}`));
    return { secret: token.secret, ca: onlyFirst(ca) };
  }
  if (!token.caHash) {
    throw new TrustError(
      "the join token is only the secret, without the server's CA pin: give the full token (llmgw-server join-token on the server prints it), or --ca FILE (LLMGW_CA) with the server's CA",
    );
  }
  const { server, pem: ca } = await fetchCa(
    servers.filter((_s, i) => urls[i]?.protocol === 'https:'),
    log,
    retryMs,
  );
  let seen: string;
  try {
    seen = caFingerprint(ca);
  } catch {
    throw new TrustError(`the server at ${server} answered /cacerts with no certificate: not connecting`);
  }
  if (!pinMatches(token.caHash, ca)) throw new TrustError(mismatch(server, token.caHash, seen, '/cacerts'));
  log.info({ server, ca_sha256: seen }, "the server's CA matches the join token's pin");
  return { secret: token.secret, ca: onlyFirst(ca) };
}
