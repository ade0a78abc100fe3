/**
 * SHA-256 of text, for the stable ids of findings and alert groups. Pure JavaScript (`@noble/hashes`), not
 * `node:crypto`: loading `node:crypto` cost every `tokenwatch` start — `--version` and `scan` included, whose output
 * formatting names alert groups — 6–10 ms (docs/performance.md "No node:crypto at start-up"), and these
 * ids hash a few short strings per finding. The digest is the standard one (FIPS 180-4), so ids are
 * the same as `createHash('sha256')` gave before.
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';

/** Lower-case hex SHA-256 (64 characters) of `text` encoded as UTF-8. */
export function sha256Hex(text: string): string {
  return bytesToHex(sha256(utf8ToBytes(text)));
}
