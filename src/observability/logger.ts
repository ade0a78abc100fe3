/**
 * Structured logging for tokenwatch (pino 10, JSON lines on stdout).
 *
 * Secrets never reach the log: every string of every log call is scrubbed ({@link scrubValue}: Slack tokens,
 * bearer/basic credentials, JWTs, AWS keys, URL userinfo, and secret-named keys in any case), known paths are
 * censored by pino's `redact` (https://getpino.io/#/docs/redaction), and the finished line is scrubbed once more.
 */
import { pino, type Logger, type LoggerOptions } from 'pino';
import { isSecretKey, scrubSecrets } from '../core/redact.js';

/** The one redaction function, shared with Slack text (src/core/redact.ts); re-exported for the log's callers. */
export { scrubSecrets } from '../core/redact.js';

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
