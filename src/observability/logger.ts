/**
 * Structured logging for tokenwatch (pino 10, JSON lines on stdout).
 *
 * Secrets never reach the log: known secret-bearing paths are redacted by pino's `redact`
 * (https://getpino.io/#/docs/redaction), and {@link scrubSecrets} masks Slack tokens
 * (`xoxb-`, `xoxp-`, `xapp-`) and bearer tokens/JWTs found inside free-text messages.
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

const SECRET_PATTERNS: readonly RegExp[] = [
  /\bxox[abposr]-[A-Za-z0-9-]+/g, // Slack bot/user/app tokens (api.slack.com/authentication/token-types)
  /\bxapp-[A-Za-z0-9-]+/g,
  /\bBearer\s+[A-Za-z0-9._~+/=-]+/gi,
  /\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+/g, // JWTs (ServiceAccount tokens)
];

/**
 * Masks Slack tokens, bearer tokens and JWTs inside a free-text string.
 * @returns the string with each secret replaced by `[Redacted]`.
 */
export function scrubSecrets(text: string): string {
  let out = text;
  for (const re of SECRET_PATTERNS) out = out.replace(re, '[Redacted]');
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
 * Creates the process logger: JSON lines, ISO UTC `time`, level names, secrets redacted.
 * Free-text `msg` and `err.message` values are scrubbed with {@link scrubSecrets}.
 */
export function createLogger(opts: CreateLoggerOptions = {}): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? 'info',
    base: { service: 'tokenwatch', ...(opts.base ?? {}) },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: [...REDACT_PATHS], censor: '[Redacted]' },
    hooks: {
      logMethod(args, method) {
        const scrubbed = args.map((a) => (typeof a === 'string' ? scrubSecrets(a) : a));
        method.apply(this, scrubbed as Parameters<typeof method>);
      },
    },
    serializers: {
      err: (err: unknown) => {
        const s = pino.stdSerializers.err(err as Error);
        if (s && typeof s.message === 'string') s.message = scrubSecrets(s.message);
        if (s && typeof s.stack === 'string') s.stack = scrubSecrets(s.stack);
        return s;
      },
    },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
