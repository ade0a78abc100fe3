/** Escaping of external text for terminal output. Pure, dependency-free (loaded by the CLI's error path). */

// C0 controls (ESC, CR, BS, …, and LF/TAB: values never hold line breaks of their own), DEL, C1 controls, and the
// Unicode bidirectional overrides/isolates that can reorder what a terminal shows.
// eslint-disable-next-line no-control-regex
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Makes external text (pod names, user agents, names from audit events or snapshots, reader messages) safe to
 * print on a terminal: control characters become visible escapes (`\x1b`, `\x0a`, `\u202e`), so a value such
 * as `ESC[31m` cannot recolour, move the cursor or hide text. Printable text is unchanged. Pure.
 */
export function escapeControl(text: string): string {
  return text.replace(CONTROL_RE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
