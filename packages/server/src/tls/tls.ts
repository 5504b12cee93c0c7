import { X509Certificate, createPrivateKey } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { writePrivateFile } from '@llmgw/shared';
import { createCa, issueServerCert, pemCertificates, reissueReason, san, type KeyPair, type San } from './certs.js';

/** What the admin listener serves TLS with, and the CA agents pin. */
export interface AdminTls extends KeyPair {
  /** The CA certificate (PEM) served on `/cacerts` and pinned by the join token. */
  caPem: string;
  /** Where that CA is on disk: `<data-dir>/tls/ca.pem`, or the operator's --tls-cert. */
  caFile: string;
}

export interface AdminTlsSettings {
  dataDir: string;
  /** The admin listener's HOST:PORT host; a wildcard (0.0.0.0, ::, empty) adds nothing by itself. */
  listenHost: string;
  /** `--tls-san`: more names or addresses the certificate must carry. */
  extraSans: string[];
  /** `--tls-cert` / `--tls-key`: the operator's certificate (chain) and key, used as given. */
  certFile?: string;
  keyFile?: string;
}

const WILDCARDS = new Set(['', '0.0.0.0', '::', '[::]']);

/**
 * The names a generated server certificate carries: the listen address, the hostname,
 * every address of this machine, loopback, and `--tls-san`. So an agent reaches the
 * server by any of the machine's names without a flag, and a name from outside (a load
 * balancer, a NAT address) is one `--tls-san` away.
 */
export function wantedSans(listenHost: string, extra: string[], hostname = os.hostname(), interfaces = os.networkInterfaces()): San[] {
  const names = ['127.0.0.1', '::1', 'localhost', hostname];
  if (!WILDCARDS.has(listenHost)) names.push(listenHost);
  for (const addrs of Object.values(interfaces)) for (const a of addrs ?? []) names.push(a.address);
  names.push(...extra);
  const seen = new Set<string>();
  return names
    .map((n) => n.trim())
    .filter(Boolean)
    .map(san)
    .filter((s) => !seen.has(`${s.type}:${s.value}`) && Boolean(seen.add(`${s.type}:${s.value}`)));
}

/** The generated CA and server certificate, each with its key, under `<data-dir>/tls/`. */
export function tlsFiles(dataDir: string): { dir: string; ca: string; caKey: string; cert: string; key: string } {
  const dir = path.join(dataDir, 'tls');
  return { dir, ca: path.join(dir, 'ca.pem'), caKey: path.join(dir, 'ca-key.pem'), cert: path.join(dir, 'server.pem'), key: path.join(dir, 'server-key.pem') };
}

/** A certificate and key read from their files, or undefined when either cannot be read. */
export function readPair(certFile: string, keyFile: string): KeyPair | undefined {
  try {
    return { cert: fs.readFileSync(certFile, 'utf8'), key: fs.readFileSync(keyFile, 'utf8') };
  } catch {
    return undefined;
  }
}

/**
 * Reads an operator's certificate and key (`--tls-cert`/`--tls-key`, and the client
 * listener's pair), checking that they belong together; the error names the flags.
 */
export function operatorPair(certFile: string, keyFile: string, flags: string): KeyPair {
  const pair = readPair(certFile, keyFile);
  if (!pair) throw new Error(`cannot read ${flags} (${certFile}, ${keyFile}): give a PEM certificate and its PEM private key`);
  try {
    const leaf = pemCertificates(pair.cert)[0];
    if (!leaf) throw new Error(`${certFile} has no PEM certificate`);
    if (!new X509Certificate(leaf).checkPrivateKey(createPrivateKey(pair.key))) throw new Error(`${keyFile} is not the key of ${certFile}`);
  } catch (err) {
    throw new Error(`invalid ${flags}: ${(err as Error).message}`, { cause: err });
  }
  return pair;
}

/**
 * The admin listener's TLS. With the operator's certificate, the pinned CA is the last
 * certificate of its file (the chain's root, or the certificate itself when it is
 * self-signed). Otherwise `<data-dir>/tls/` holds a CA made on first start and a server
 * certificate it signed; the certificate is reissued from the same CA when it no longer
 * names every wanted SAN (a new --admin-addr or --tls-san) or nears its end, so the pin
 * in every join token stays valid.
 */
export async function adminTls(s: AdminTlsSettings, log: Logger): Promise<AdminTls> {
  if (s.certFile || s.keyFile) {
    if (!s.certFile || !s.keyFile) throw new Error('give both --tls-cert and --tls-key, or neither (a CA and certificate are then generated)');
    const pair = operatorPair(s.certFile, s.keyFile, '--tls-cert/--tls-key');
    const chain = pemCertificates(pair.cert);
    return { ...pair, caPem: `${chain[chain.length - 1]!}\n`, caFile: path.resolve(s.certFile) };
  }
  const files = tlsFiles(s.dataDir);
  const dir = files.dir;
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  let ca = readPair(files.ca, files.caKey);
  if (!ca) {
    if (fs.existsSync(files.ca) || fs.existsSync(files.caKey)) {
      throw new Error(
        `${dir} has only one of ca.pem and ca-key.pem: restore the other, or remove both to make a new CA (every join token must then be handed out again)`,
      );
    }
    ca = await createCa('llmgw CA');
    writePrivateFile(files.caKey, ca.key);
    fs.writeFileSync(files.ca, ca.cert, { mode: 0o644 });
    log.info({ file: files.ca }, 'created the CA that agents pin (its fingerprint is in the join token)');
  }
  const wanted = wantedSans(s.listenHost, s.extraSans);
  const kept = readPair(files.cert, files.key);
  const why = kept ? reissueReason(kept, ca, wanted) : 'there is none';
  if (!why && kept) return { ...kept, caPem: ca.cert, caFile: files.ca };
  const server = await issueServerCert(ca, wanted);
  writePrivateFile(files.key, server.key);
  fs.writeFileSync(files.cert, server.cert, { mode: 0o644 });
  log.info({ file: files.cert, sans: wanted.map((x) => x.value) }, `issued the server certificate because ${why}`);
  return { ...server, caPem: ca.cert, caFile: files.ca };
}
