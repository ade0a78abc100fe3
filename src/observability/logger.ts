/**
 * Structured logging for tokenwatch (pino 10, JSON lines on stdout).
 *
 * Secrets never reach the log: every string of every log call is scrubbed ({@link scrubValue}: Slack tokens,
 * bearer/basic credentials, JWTs, AWS keys, URL userinfo, and secret-named keys in any case), known paths are
 * censored by pino's `redact` (https://getpino.io/#/docs/redaction), and the finished line is scrubbed once more.
 */
import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

/** Paths pino censors wherever they occur in a log object (one level of nesting via `*`). */
export const REDACT_PATHS: readonly string[] = [
  'token',
  'botToken',
  'appToken',
  'signingSecret',
  'authorization',
  'password',
  'secret',
  '*.token',
  '*.botToken',
  '*.appToken',
  '*.signingSecret',
  '*.authorization',
  '*.password',
  '*.secret',
  'headers.authorization',
  '*.headers.authorization',
  'config.slack.botToken',
  'config.slack.appToken',
  'config.slack.signingSecret',
];

/**
 * Secret shapes masked in any string that reaches the log (and in error text shown elsewhere):
 * - Slack tokens `xoxb-`, `xoxp-`, `xoxa-`, `xoxo-`, `xoxs-`, `xoxr-`, `xapp-` (api.slack.com/authentication/token-types);
 * - `Bearer …` and `Basic …` credentials (RFC 6750 §2.1, RFC 7617);
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
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi, '$1 [Redacted]'],
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
 * A URL for display: userinfo (`user:password@`) removed, e.g. `https://[Redacted]@proxy:8443/api/` for
 * `https://bot:hunter2@proxy:8443/api/`. Non-URL text is scrubbed with {@link scrubSecrets}.
 */
export function maskUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.username || u.password) {
      u.username = '';
      u.password = '';
      return scrubSecrets(u.toString().replace('://', '://[Redacted]@'));
    }
    return scrubSecrets(u.toString());
  } catch {
    return scrubSecrets(url);
  }
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

/** Depth bound of {@link scrubValue}: deeper values become `[Truncated]` (log objects are small; cycles end here). */
const MAX_SCRUB_DEPTH = 8;

/**
 * A copy of a log value with every string scrubbed ({@link scrubSecrets}) at any depth, string values of secret
 * keys ({@link isSecretKey}) replaced by `[Redacted]`, and `Error`s turned into pino's error shape (`type`,
 * `message`, `stack`, own enumerable fields, `cause`) scrubbed the same way. Cycles and depth beyond 8 end in
 * `[Circular]` / `[Truncated]`. Non-plain objects other than errors, arrays, Maps and Sets are kept as they are
 * (their JSON form is scrubbed by the logger's `streamWrite` hook).
 */
export function scrubValue(value: unknown, depth = 0, seen: WeakSet<object> = new WeakSet()): unknown {
  if (typeof value === 'string') return scrubSecrets(value);
  if (value === null || typeof value !== 'object') return value;
  if (seen.has(value)) return '[Circular]';
  if (depth >= MAX_SCRUB_DEPTH) return '[Truncated]';
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((v) => scrubValue(v, depth + 1, seen));
    if (value instanceof Error) {
      const s = pino.stdSerializers.err(value) as unknown as Record<string, unknown>;
      return scrubObject(s, depth, seen);
    }
    if (value instanceof Map) return scrubObject(Object.fromEntries(value), depth, seen);
    if (value instanceof Set) return [...value].map((v) => scrubValue(v, depth + 1, seen));
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto !== Object.prototype && proto !== null) return value;
    return scrubObject(value as Record<string, unknown>, depth, seen);
  } finally {
    seen.delete(value);
  }
}

function scrubObject(obj: Record<string, unknown>, depth: number, seen: WeakSet<object>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k] = typeof v === 'string' && isSecretKey(k) ? '[Redacted]' : scrubValue(v, depth + 1, seen);
  return out;
}

/** Options of {@link createLogger}. */
export interface CreateLoggerOptions {
  /** pino level name; default `info` (env `LOG_LEVEL` is read by callers, not here). */
  level?: string;
  /** Destination stream; default stdout. Tests pass a writable to capture lines. */
  destination?: NodeJS.WritableStream;
  /** Base fields added to every line, e.g. `{ service: 'tokenwatch' }`. */
  base?: Record<string, unknown>;
}

/**
 * Creates the process logger: JSON lines, ISO UTC `time`, level names, secrets redacted in three layers:
 * 1. every argument of every log call is copied through {@link scrubValue} (all string fields at any depth, secret
 *    keys in any case, errors including `err: String(e)` text, causes and extra fields);
 * 2. pino `redact` censors {@link REDACT_PATHS};
 * 3. the finished JSON line passes {@link scrubSecrets} (pino `hooks.streamWrite`), which covers child-logger
 *    bindings and anything a serializer added.
 */
export function createLogger(opts: CreateLoggerOptions = {}): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? 'info',
    base: scrubValue({ service: 'tokenwatch', ...(opts.base ?? {}) }) as Record<string, unknown>,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: [...REDACT_PATHS], censor: '[Redacted]' },
    hooks: {
      logMethod(args, method) {
        // An Error as first argument is pino's `err` shorthand: keep it under `err` once it is a plain object.
        const scrubbed = args.map((a, i) => (i === 0 && a instanceof Error ? { err: scrubValue(a) } : scrubValue(a)));
        method.apply(this, scrubbed as Parameters<typeof method>);
      },
      streamWrite: (line) => scrubSecrets(line),
    },
    serializers: {
      err: (err: unknown) => {
        // Errors were already turned into scrubbed plain objects by the logMethod hook.
        if (!(err instanceof Error)) return err;
        return scrubValue(err);
      },
    },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
