import { describe, expect, it } from '@jest/globals';
import { tlsFailureHint } from './index.js';

describe('tlsFailureHint', () => {
  it('says which flag fixes a name the certificate lacks, and ignores what is not TLS', () => {
    expect(tlsFailureHint('ERR_TLS_CERT_ALTNAME_INVALID', 'https://10.0.0.9:8081', '--ca')).toContain('--tls-san 10.0.0.9');
    expect(tlsFailureHint('UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'https://h:1', '--ca FILE')).toContain('--ca FILE');
    expect(tlsFailureHint('ECONNREFUSED', 'https://h:1', '--ca')).toBeUndefined();
  });

  it.each(['ERR_TLS_CERT_ALTNAME_INVALID', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'CERT_HAS_EXPIRED', 'EPROTO'])(
    '%s names the URL it was refused by',
    (code) => {
      expect(tlsFailureHint(code, 'https://other.invalid:8081', '--ca FILE')).toContain('https://other.invalid:8081');
    },
  );
});
