import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { caFingerprint, fullJoinToken, parseJoinToken, pinMatches, tlsFailureHint } from './index.js';

// A self-signed ECDSA P-256 certificate (openssl, valid for 100 years): any CA will do.
const CA = `-----BEGIN CERTIFICATE-----
MIIBljCCAT2gAwIBAgIUNBxFuaMSrhJHHX0yPnyDadnpdJYwCgYIKoZIzj0EAwIw
GDEWMBQGA1UEAwwNbGxtZ3cgdGVzdCBjYTAgFw0yNjEyMDExMjI1MjJaGA8yMTI2
MTEwNzEyMjUyMlowGDEWMBQGA1UEAwwNbGxtZ3cgdGVzdCBjYTBZMBMGByqGSM49
AgEGCCqGSM49AwEHA0IABOmLIITguE2X1C8JtA3x8O5QUR9ke2gAOGOvvekuLAhH
TSz/5DFkj7aJqHx4hm6ZJ/ZOqdhjuYXWWP6WsPlg59WjYzBhMB0GA1UdDgQWBBTz
q1XhWZ+pgwForX8nYzka03qrKDAfBgNVHSMEGDAWgBTzq1XhWZ+pgwForX8nYzka
03qrKDAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQEAwICBDAKBggqhkjOPQQD
AgNHADBEAiAxi9bZO2ON7+pn1wZfaTvgEnFSgNBF7W9G73WbHBuydAIgJAUorkpz
c3le/s/18GXPpx/nBY4awjrhOcs/r/CABK8=
-----END CERTIFICATE-----
`;

describe('the join token', () => {
  it("pins the SHA-256 of the CA's DER, the fingerprint openssl and Node show", () => {
    expect(caFingerprint(CA)).toBe(new X509Certificate(CA).fingerprint256.replaceAll(':', '').toLowerCase());
    expect(fullJoinToken('s3cret', CA)).toBe(`K10${caFingerprint(CA)}::s3cret`);
  });

  it('splits into the secret to send and the pin to check; a bare secret has no pin', () => {
    expect(parseJoinToken(fullJoinToken('a::b', CA))).toEqual({ secret: 'a::b', caHash: caFingerprint(CA) });
    expect(parseJoinToken(' llmgw-join-x\n')).toEqual({ secret: 'llmgw-join-x' });
    expect(parseJoinToken('K10abc::s')).toEqual({ secret: 'K10abc::s' });
  });

  it('matches its own CA only: one changed digit of the pin is a mismatch', () => {
    const pin = caFingerprint(CA);
    expect(pinMatches(pin, CA)).toBe(true);
    expect(pinMatches(`${pin[0] === '0' ? '1' : '0'}${pin.slice(1)}`, CA)).toBe(false);
    expect(pinMatches(pin.slice(2), CA)).toBe(false);
  });
});

describe('tlsFailureHint', () => {
  it('says which flag fixes a name the certificate lacks, and ignores what is not TLS', () => {
    expect(tlsFailureHint('ERR_TLS_CERT_ALTNAME_INVALID', 'https://10.0.0.9:8081', '--ca')).toContain('--tls-san 10.0.0.9');
    expect(tlsFailureHint('UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'https://h:1', '--ca FILE')).toContain('--ca FILE');
    expect(tlsFailureHint('ECONNREFUSED', 'https://h:1', '--ca')).toBeUndefined();
  });
});
