/**
 * Time units: the one definition of the seconds and milliseconds in a minute, hour, day and week that the rest of
 * tokenwatch computes with (internal times are epoch milliseconds; audit annotations and thresholds count seconds).
 * Pure constants, importable from every stage, the browser page of the sandbox included.
 */

/** Milliseconds in one second. */
export const SECOND_MS = 1000;
/** Milliseconds in one minute. */
export const MINUTE_MS = 60 * SECOND_MS;
/** Milliseconds in one hour. */
export const HOUR_MS = 60 * MINUTE_MS;
/** Milliseconds in one day (24 h; UTC has no daylight saving). */
export const DAY_MS = 24 * HOUR_MS;
/** Milliseconds in one week. */
export const WEEK_MS = 7 * DAY_MS;

/** Seconds in one minute. */
export const MINUTE_SECONDS = 60;
/** Seconds in one hour. */
export const HOUR_SECONDS = 60 * MINUTE_SECONDS;
/** Seconds in one day. */
export const DAY_SECONDS = 24 * HOUR_SECONDS;
