import { describe, expect, it } from '@jest/globals';
import { headersFor, parseSourceHeaders } from './headers.js';

describe('parseSourceHeaders (--source-header)', () => {
  const files: Record<string, string> = { '/t': 'Bearer secret\n', '/empty': '\n' };
  const read = (f: string) => {
    const v = files[f];
    if (v === undefined) throw new Error('ENOENT: no such file');
    return v;
  };

  it('reads HOST=Name: value, a value @FILE from the file, several per host', () => {
    const h = parseSourceHeaders(['Models.example.com=Authorization: @/t', 'models.example.com=X-Org: acme', 'store:8443=X-Key: k'], read);
    expect(headersFor(h, new URL('https://models.example.com/a.gguf'))).toEqual({ authorization: 'Bearer secret', 'x-org': 'acme' });
    expect(headersFor(h, new URL('https://store:8443/a'))).toEqual({ 'x-key': 'k' });
    expect(headersFor(h, new URL('https://store/a'))).toEqual({});
    expect(headersFor(h, new URL('https://elsewhere/a'))).toEqual({});
  });

  it.each([
    ['no-equals', /want HOST=Name: value/],
    ['host=no colon', /want HOST=Name: value/],
    ['host=Bad Name: v', /want HOST=Name: value/],
    ['host=X-Key: @/missing', /cannot read \/missing: ENOENT/],
    ['host=X-Key: @/empty', /empty or spans lines/],
  ])('refuses %s', (v, why) => expect(() => parseSourceHeaders([v], read)).toThrow(why));

  it.each([
    ['Authorization: Bearer s3cret', 'invalid --source-header "Authorization: …"'],
    ['host=Bad Name: Bearer s3cret', 'invalid --source-header "host=Bad Name: …"'],
    ['store:8443 X-Key: s3cret', 'invalid --source-header "store: …"'],
    ['host=Authorization=Bearer s3cret', 'invalid --source-header "host= …"'],
    ['s3cret', 'invalid --source-header "…"'],
  ])('a malformed %j is refused without echoing its value', (v, start) => {
    let message = '';
    try {
      parseSourceHeaders([v], read);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message.startsWith(start)).toBe(true);
    expect(message).not.toContain('s3cret');
  });
});
