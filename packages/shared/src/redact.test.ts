import { describe, expect, it } from '@jest/globals';
import { redactUrl, redactUrls, sourceForViewer } from './redact.js';

describe('URL redaction (issue 27: passwords and signatures in source URLs were shown)', () => {
  it('masks userinfo and signature-like parameters, keeping what says which file it is', () => {
    expect(redactUrl('https://bob:hunter2@files.example/m/q4.gguf?X-Amz-Signature=abc&X-Amz-Credential=AKIA&part=1')).toBe(
      'https://***:***@files.example/m/q4.gguf?X-Amz-Signature=***&X-Amz-Credential=***&part=1',
    );
    expect(redactUrl('https://acct.blob.core.windows.net/c/m.gguf?sv=2024&sig=Zm9v&se=2026')).toBe(
      'https://acct.blob.core.windows.net/c/m.gguf?sv=***&sig=***&se=***',
    );
    expect(redactUrl('https://files.example/m.gguf?token=t0k3n')).toBe('https://files.example/m.gguf?token=***');
    expect(redactUrl('Qwen/Qwen2.5-7B')).toBe('Qwen/Qwen2.5-7B');
  });

  it('finds URLs inside messages', () => {
    expect(redactUrls('cannot fetch https://u:p@h.example/f?sig=s: ECONNRESET (3 tries)')).toBe(
      'cannot fetch https://***:***@h.example/f?sig=***: ECONNRESET (3 tries)',
    );
  });

  it('shows a viewer only the scheme and host of a URL source', () => {
    expect(sourceForViewer('https://u:p@h.example/private/bucket/m.gguf?sig=s')).toBe('https://h.example/…');
    expect(sourceForViewer('/models/m.gguf')).toBe('/models/m.gguf');
    expect(sourceForViewer('org/model')).toBe('org/model');
  });
});
