/**
 * The `maxTokenAge` value of the config and of `scan --max-token-age`: how long the API server accepts a stale token
 * (the arithmetic on it is `rejectionTime` in src/findings/token-math.ts), and its one grammar.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { DurationError, parseDuration } from './duration.js';

/**
 * How long the API server accepts a stale token.
 * - `eks`: 7,776,000 s (90 days) after `warnAfter` (EKS user guide, service-accounts);
 * - `upstream`: 31,536,000 s (1 year) after issue, issue ≈ warnAfter − 3607 s
 *   (kubernetes `pkg/registry/core/serviceaccount/storage/token.go`, `ExpirationExtensionSeconds`);
 * - `seconds`: a custom limit in seconds after `warnAfter`.
 */
export type MaxTokenAge = { mode: 'eks' } | { mode: 'upstream' } | { mode: 'seconds'; seconds: number };

/** What {@link parseMaxTokenAge} accepts, in the words its error uses. */
export const MAX_TOKEN_AGE_EXPECTED =
  'expected "eks" (90 days), "upstream" (1 year), a number of seconds, or a duration such as "90d"';

/**
 * Parses a `maxTokenAge` config value or a `scan --max-token-age` flag: one grammar for both.
 *
 * @param v `eks`, `upstream` (case-insensitive, surrounding blanks ignored), a positive whole number of seconds
 *   after `warnAfter` (a number, or digits such as `7776000`), or a duration string in the config's grammar
 *   (`90d`, `2w`, `1d12h`; see `parseDuration` in src/config/duration.ts) that is a positive whole number of seconds.
 * @returns `{mode:'eks'}`, `{mode:'upstream'}` or `{mode:'seconds', seconds}`.
 * @throws TokenwatchError (`value_invalid`) naming the bad value when it is none of these (`0`, `-5`, `1.5`, `1500ms`, empty).
 */
export function parseMaxTokenAge(v: string | number): MaxTokenAge {
  const text = typeof v === 'number' ? '' : v.trim().toLowerCase();
  if (text === 'eks') return { mode: 'eks' };
  if (text === 'upstream') return { mode: 'upstream' };
  let seconds: number | undefined;
  if (typeof v === 'number') seconds = v;
  else if (/^[0-9]+$/.test(text)) seconds = Number(text);
  else {
    try {
      const ms = parseDuration(text);
      if (ms % 1000 === 0) seconds = ms / 1000;
    } catch (err) {
      if (!(err instanceof DurationError)) throw err;
    }
  }
  if (seconds !== undefined && Number.isSafeInteger(seconds) && seconds > 0) return { mode: 'seconds', seconds };
  throw new TokenwatchError(ErrorCode.ValueInvalid, `invalid max token age ${JSON.stringify(v)}: ${MAX_TOKEN_AGE_EXPECTED}`);
}
