/**
 * `action_id`s of tokenwatch's buttons (what Bolt listeners match on) and the opaque-id rule for button values.
 *
 * Buttons carry only an opaque id in `value`; the target is read from the store, never from the payload
 * (docs/design/architecture.md "Slack and approvals"). An opaque id is 8–128 chars of `[A-Za-z0-9_-]` (e.g. 128 random bits in base64url);
 * anything else (a `namespace/name`, JSON, spaces) is rejected so a target cannot leak into a payload.
 */

/** Button `action_id`s. A finding with several restartable workloads gets `tw_restart`, `tw_restart:1`, … */
export const ACTION_IDS = {
  restart: 'tw_restart',
  recreateServiceAccount: 'tw_recreate_sa',
  snooze1d: 'tw_snooze_1d',
  snooze7d: 'tw_snooze_7d',
  details: 'tw_details',
  /** The overflow menu of an alert (Recreate ServiceAccount…, Snooze, Details); its option values are opaque ids. */
  more: 'tw_more',
  approve: 'tw_approve',
  reject: 'tw_reject',
} as const;

/** Matches every restart button's action_id (for `app.action(RESTART_ACTION_ID_PATTERN, …)`). */
export const RESTART_ACTION_ID_PATTERN = /^tw_restart(?::\d+)?$/;

/** Shape of an opaque id. */
export const OPAQUE_ID_PATTERN = /^[A-Za-z0-9_-]{8,128}$/;

/**
 * Returns `id` when it is an opaque id, else throws.
 * @throws TypeError naming the offending value's length (never its content) when `id` is not opaque.
 */
export function opaqueId(id: string): string {
  if (!OPAQUE_ID_PATTERN.test(id)) {
    throw new TypeError(`button value must be an opaque id matching ${OPAQUE_ID_PATTERN} (got ${id.length} chars)`);
  }
  return id;
}
