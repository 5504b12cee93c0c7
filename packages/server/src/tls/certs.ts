import 'reflect-metadata';
import { X509Certificate, createPrivateKey, randomBytes, webcrypto } from 'node:crypto';
import net from 'node:net';
import * as x509 from '@peculiar/x509';

/**
 * Issuing the CA and the server certificate: ECDSA P-256 (small, fast, accepted by every
 * TLS client we have), made with @peculiar/x509 on WebCrypto because Node's crypto can
 * read certificates but not issue them. Everything here is PEM in, PEM out.
 */

// Node's WebCrypto types differ from the DOM's by an Ed25519 overload; the object is the same.
x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;
/** The CA outlives any server certificate: the pin in every join token depends on it. */
const CA_DAYS = 3650;
/**
 * The most Apple's TLS stack accepts for any server certificate; the server reissues it
 * from the same CA on a start within `RENEW_DAYS` of its end, so the pin never changes.
 */
export const SERVER_CERT_DAYS = 825;
export const RENEW_DAYS = 30;

/** A certificate and its private key, both PEM. */
export interface KeyPair {
  cert: string;
  key: string;
}

/** One subjectAltName: an IP address or a DNS name. */
export interface San {
  type: 'ip' | 'dns';
  value: string;
}

/** `10.0.0.5` → ip, `gw.example.com` → dns; IPv6 in its canonical (compressed, lowercase) form. */
export function san(text: string): San {
  const v = text.trim().replace(/^\[(.*)\]$/, '$1');
  if (net.isIPv6(v)) return { type: 'ip', value: new URL(`http://[${v}]`).hostname.slice(1, -1) };
  if (net.isIPv4(v)) return { type: 'ip', value: v };
  return { type: 'dns', value: v.toLowerCase() };
}

const sanKey = (s: San) => `${s.type}:${s.value}`;

/** The SANs a PEM certificate names, in `san()`'s canonical form. */
export function sansOf(certPem: string): San[] {
  const text = new X509Certificate(certPem).subjectAltName ?? '';
  const out: San[] = [];
  for (const part of text.split(', ')) {
    if (part.startsWith('DNS:')) out.push(san(part.slice(4)));
    else if (part.startsWith('IP Address:')) out.push(san(part.slice(11)));
  }
  return out;
}

/** The wanted SANs the certificate does not name. */
export function missingSans(certPem: string, wanted: San[]): San[] {
  const have = new Set(sansOf(certPem).map(sanKey));
  return wanted.filter((s) => !have.has(sanKey(s)));
}

function serial(): string {
  const b = randomBytes(16);
  b[0]! &= 0x7f; // positive, as RFC 5280 requires
  return b.toString('hex');
}

async function keyPem(key: CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');
}

/** A new self-signed CA that may only sign certificates. */
export async function createCa(commonName: string): Promise<KeyPair> {
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${commonName}`,
    notBefore: new Date(now - DAY_MS),
    notAfter: new Date(now + CA_DAYS * DAY_MS),
    signingAlgorithm: ALG,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: cert.toString('pem'), key: await keyPem(keys.privateKey) };
}

/** A server certificate for `sans`, signed by `ca`. */
export async function issueServerCert(ca: KeyPair, sans: San[]): Promise<KeyPair> {
  const caCert = new x509.X509Certificate(ca.cert);
  const signingKey = await webcrypto.subtle.importKey('pkcs8', x509.PemConverter.decode(ca.key)[0]!, ALG, false, ['sign']);
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: 'CN=llmgw-server',
    issuer: caCert.subject,
    notBefore: new Date(now - DAY_MS),
    notAfter: new Date(now + SERVER_CERT_DAYS * DAY_MS),
    signingAlgorithm: ALG,
    publicKey: keys.publicKey,
    signingKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(sans.map((s) => ({ type: s.type, value: s.value }))),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  return { cert: cert.toString('pem'), key: await keyPem(keys.privateKey) };
}

/**
 * Why a kept server certificate must be reissued, or undefined when it still serves:
 * not signed by this CA, not matching its key, ending within `RENEW_DAYS`, or missing a SAN.
 */
export function reissueReason(server: KeyPair, ca: KeyPair, wanted: San[], now = Date.now()): string | undefined {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(server.cert);
    if (!cert.checkPrivateKey(createPrivateKey(server.key))) return 'its key does not match';
  } catch (err) {
    return `it cannot be read (${(err as Error).message})`;
  }
  const caCert = new X509Certificate(ca.cert);
  if (!cert.checkIssued(caCert) || !cert.verify(caCert.publicKey)) return 'it was not signed by this CA';
  if (new Date(cert.validTo).getTime() - now < RENEW_DAYS * DAY_MS) return `it ends on ${cert.validTo}`;
  const missing = missingSans(server.cert, wanted);
  if (missing.length) return `it does not name ${missing.map((s) => s.value).join(', ')}`;
  return undefined;
}

/** The PEM certificates of a file, in order (a chain: the leaf first). */
export function pemCertificates(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}
