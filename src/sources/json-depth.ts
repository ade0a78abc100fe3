/**
 * Nesting depth of JSON text, measured on the bytes (no recursion, no parse): used to refuse a document whose
 * re-serialisation (`JSON.stringify`, which recurses) would overflow the stack.
 */

const OPEN_OBJECT = 0x7b; // {
const OPEN_ARRAY = 0x5b; // [
const CLOSE_OBJECT = 0x7d; // }
const CLOSE_ARRAY = 0x5d; // ]
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

/**
 * Whether UTF-8 JSON text `json` nests objects and arrays deeper than `max` levels (a top-level `{}` is depth 1).
 * Brackets inside strings (with their backslash escapes) are not counted. Works on any text: it does not validate it.
 */
export function jsonDepthExceeds(json: Buffer, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const b = json[i]!;
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
      if (++depth > max) return true;
    } else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) depth--;
  }
  return false;
}
