/**
 * The one redaction of token-like strings in text tokenwatch shows: the log (src/observability/logger.ts scrubs every
 * string and line with it) and Slack (src/slack/blocks/text.ts passes every text object and fallback text through it,
 * so a JWT inside an audit event's user agent never reaches a channel). Pure, no I/O.
 */

/**
 * Secret shapes masked in any string that reaches the log or Slack (and in error text shown elsewhere):
 * - Slack tokens `xoxb-`, `xoxp-`, `xoxa-`, `xoxo-`, `xoxs-`, `xoxr-`, `xapp-` (api.slack.com/authentication/token-types);
 * - the value of an `Authorization:`/`Proxy-Authorization:` header (RFC 9110 §11.6.2), whatever it looks like;
 * - `Bearer …` and `Basic …` credentials elsewhere, in any case (RFC 6750 §2.1 b64token, RFC 7617): a value with a
 *   digit or one of `_~+/`, or of 16 characters or more, so prose such as "a bearer or OAuth token" is left alone;
 * - JWTs `eyJ….….…` (ServiceAccount tokens, OIDC tokens);
 * - AWS access key ids `AKIA…`/`ASIA…` (16 upper-case letters/digits after the prefix; IAM user guide "Access key
 *   format"), `aws_secret_access_key=…`/`aws_session_token=…` assignments, and SigV4 query parameters
 *   `X-Amz-Signature`, `X-Amz-Security-Token`, `X-Amz-Credential`;
 * - URL userinfo `scheme://user:password@host` (RFC 3986 §3.2.1): the whole userinfo becomes `[Redacted]`;
 * - Slack's one-time Socket Mode WebSocket `ticket=` query parameter (the `url` that `apps.connections.open` returns,
 *   https://api.slack.com/methods/apps.connections.open) and `token=`/`access_token=` query parameters;
 * - Slack response URLs `https://hooks.slack.com/…` (anyone holding one can post in the channel for 30 minutes:
 *   https://api.slack.com/interactivity/handling#message_responses).
 * Besides these shapes, {@link scrubSecrets} masks the value of every `"key": "value"` pair inside a string whose key
 * names a secret ({@link isSecretKey}): the Socket Mode client and Bolt print whole envelopes as JSON at debug level,
 * with the payload's verification `token` and its `response_url`.
 */
const SECRET_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [/\bxox[abposr]-[A-Za-z0-9-]+/g, '[Redacted]'],
  [/\bxapp-[A-Za-z0-9-]+/g, '[Redacted]'],
  [/\b((?:Proxy-)?Authorization\s*[:=]\s*["']?(?:(?:Bearer|Basic)\s+)?)[^\s"',;]+/gi, '$1[Redacted]'],
  [/\b(Bearer|Basic)\s+(?:[A-Za-z0-9._~+/-]*[0-9_~+/][A-Za-z0-9._~+/-]*|[A-Za-z0-9._~+/-]{16,})=*/gi, '$1 [Redacted]'],
  [/\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*/g, '[Redacted]'],
  [/\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g, '[Redacted]'],
  [/\b(aws_secret_access_key|aws_session_token|secretAccessKey|sessionToken)(["']?\s*[=:]\s*["']?)[A-Za-z0-9/+=]{16,}/gi, '$1$2[Redacted]'],
  [/\b(X-Amz-(?:Signature|Security-Token|Credential))=[^&\s"']+/gi, '$1=[Redacted]'],
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>]+@/gi, '$1[Redacted]@'],
  [/([?&](?:ticket|token|access_token)=)[^&\s"'#<>]+/gi, '$1[Redacted]'],
  [/\bhttps:\/\/hooks\.slack\.com\/[^\s"'<>\\]+/gi, 'https://hooks.slack.com/[Redacted]'],
];

/** A `"key": "value"` pair of JSON text inside a string (value with JSON escapes). */
const JSON_PAIR = /"([A-Za-z0-9_.-]{1,64})"(\s*:\s*)"((?:[^"\\]|\\.)*)"/g;

/**
 * Masks Slack tokens, bearer/basic credentials, JWTs, AWS keys and URL userinfo (user:password@) inside a string
 * (see `SECRET_PATTERNS` above).
 * @returns the string with each secret replaced by `[Redacted]` (URL userinfo: `https://[Redacted]@host/…`).
 */
export function scrubSecrets(text: string): string {
  let out = text;
  for (const [re, to] of SECRET_PATTERNS) out = out.replace(re, to);
  if (out.includes('"')) out = out.replace(JSON_PAIR, (pair, key: string, colon: string) => (isSecretKey(key) ? `"${key}"${colon}"[Redacted]"` : pair));
  return out;
}

/**
 * Object keys whose string values are secrets whatever they look like, compared case-insensitively with `-`/`_`
 * removed (so `Authorization`, `x-api-key`, `secret_access_key` all match).
 */
const SECRET_KEYS = new Set([
  'authorization',
  'proxyauthorization',
  'cookie',
  'setcookie',
  'password',
  'passwd',
  'secret',
  'token',
  'bottoken',
  'apptoken',
  'signingsecret',
  'accesstoken',
  'refreshtoken',
  'idtoken',
  'sessiontoken',
  'securitytoken',
  'xamzsecuritytoken',
  'secretaccesskey',
  'awssecretaccesskey',
  'clientsecret',
  'apikey',
  'xapikey',
  'xslacksignature',
  'responseurl',
  'ticket',
]);

/** Whether a field name names a secret (see `SECRET_KEYS`). */
export function isSecretKey(key: string): boolean {
  return SECRET_KEYS.has(key.toLowerCase().replace(/[-_]/g, ''));
}
