/**
 * Token arithmetic: from one stale-token audit event to the token's `warnafter` point, its issue
 * time and the time the API server will reject it.
 *
 * All times are epoch milliseconds UTC; durations named `...Seconds` are seconds.
 *
 * Sources (see docs/design/domain.md §1):
 * - kubernetes `pkg/serviceaccount/claims.go`: the kubelet requests bound tokens with
 *   `expirationSeconds: 3607` (`WarnOnlyBoundTokenExpirationSeconds = 60*60 + 7`); a request made
 *   after the token's `kubernetes.io/warnafter` claim is annotated
 *   `authentication.k8s.io/stale-token: "subject: %s, seconds after warning threshold: %d"`,
 *   the number being `now - warnafter` in whole seconds.
 * - kubernetes `pkg/registry/core/serviceaccount/storage/token.go`: with
 *   `--service-account-extend-token-expiration` the real expiry is extended to 1 year after issue
 *   (`ExpirationExtensionSeconds = 24*365*60*60`), the 3607 s point becomes `warnafter`.
 * - EKS user guide, "Service accounts" → "Identify pods using stale tokens"
 *   (https://docs.aws.amazon.com/eks/latest/userguide/service-accounts.html): EKS rejects a token
 *   once `seconds after warning threshold` exceeds 90 days = 7,776,000 s.
 */
import type { MaxTokenAge } from '../config/max-token-age.js';

/** Lifetime the kubelet requests for bound tokens, seconds (kubernetes `pkg/serviceaccount/claims.go`). */
export const WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS = 3607;
/** EKS limit: seconds after `warnafter` before a stale token is rejected (EKS user guide, service-accounts). */
export const EKS_MAX_SECONDS_AFTER_WARNING = 7_776_000;
/** Upstream extended expiry, seconds after issue (kubernetes `storage/token.go`, `ExpirationExtensionSeconds`). */
export const UPSTREAM_EXPIRATION_EXTENSION_SECONDS = 31_536_000;

/**
 * When a token with the given `warnAfter` is rejected, epoch ms.
 * - `eks`: `warnAfter + 7,776,000 s` (EKS user guide);
 * - `upstream`: `issuedAt + 31,536,000 s`, `issuedAt = warnAfter − 3607 s` (kubernetes `storage/token.go`);
 * - `seconds`: `warnAfter + N s`.
 */
export function rejectionTime(warnAfter: number, maxTokenAge: MaxTokenAge): number {
  switch (maxTokenAge.mode) {
    case 'eks':
      return warnAfter + EKS_MAX_SECONDS_AFTER_WARNING * 1000;
    case 'upstream':
      return issuedTime(warnAfter) + UPSTREAM_EXPIRATION_EXTENSION_SECONDS * 1000;
    case 'seconds':
      return warnAfter + maxTokenAge.seconds * 1000;
  }
}

/** Approximate issue time of a bound token, `warnAfter − 3607 s`, epoch ms (kubernetes `claims.go`). */
export function issuedTime(warnAfter: number): number {
  return warnAfter - WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS * 1000;
}

/**
 * The `warnafter` point of the token seen in one stale-token audit event, epoch ms:
 * `eventTime − secondsAfterWarning·1000`, with the event time truncated to whole seconds. The API
 * server computes the annotation as `nowTime.Unix() - warnafter.Time().Unix()` and `warnafter` is a
 * JWT NumericDate in whole seconds (kubernetes `pkg/serviceaccount/claims.go`), so the sub-second part
 * of the event's microsecond timestamp is not part of it.
 */
export function warnAfterTime(eventTimeMs: number, secondsAfterWarning: number): number {
  return Math.floor(eventTimeMs / 1000) * 1000 - secondsAfterWarning * 1000;
}
