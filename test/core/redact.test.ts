/** The one redaction of token-like strings (src/core/redact.ts), shared by the log and Slack text. */
import { describe, expect, it } from 'vitest';
import { scrubSecrets } from '../../src/core/redact.js';

describe('scrubSecrets', () => {
  it('redacts JWTs (three base64url parts) and bearer/basic values in any case', () => {
    const jwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YTpiIn0.c2lnbmF0dXJlLXBhcnQ';
    expect(scrubSecrets(`ua/1.0 ${jwt} x`)).toBe('ua/1.0 [Redacted] x');
    expect(scrubSecrets(`ua/1.0 ${jwt.slice(0, jwt.lastIndexOf('.') + 1)}`)).toBe('ua/1.0 [Redacted]');
    expect(scrubSecrets('Authorization: Bearer abc123')).toBe('Authorization: Bearer [Redacted]');
    expect(scrubSecrets('bearer k8s-aws-v1.aHR0cHM6Ly9zdHM')).toBe('bearer [Redacted]');
    expect(scrubSecrets('BEARER abcdefghijklmnopqrstu')).toBe('BEARER [Redacted]');
    expect(scrubSecrets('Basic dXNlcjpwYXNzd29yZA==')).toBe('Basic [Redacted]');
  });

  it('redacts an Authorization header value whatever it looks like (short, letters only, or no scheme)', () => {
    expect(scrubSecrets('failed: Authorization: Bearer abc.def-ghi rejected')).toBe('failed: Authorization: Bearer [Redacted] rejected');
    expect(scrubSecrets('proxy-authorization: Basic short')).toBe('proxy-authorization: Basic [Redacted]');
    expect(scrubSecrets('Authorization=opaquevalue;')).toBe('Authorization=[Redacted];');
    expect(scrubSecrets(scrubSecrets('Authorization: Bearer abc'))).toBe('Authorization: Bearer [Redacted]');
  });

  it('leaves prose that names the scheme alone', () => {
    for (const s of ['a bearer or OAuth token put into its client', 'Authentication failed, attempted: bearer', 'Basic auth is off', 'bearer token.']) {
      expect(scrubSecrets(s)).toBe(s);
    }
  });
});
