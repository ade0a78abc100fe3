/**
 * English count phrases for messages: `1 sample`, `2 samples`, `1,234 lines` (numbers grouped as en-US).
 */

/**
 * `n` with en-US digit grouping (`1,234,567`): the text of `n.toLocaleString('en-US')`. Whole numbers (every count)
 * are grouped here, without `Intl`: the first `toLocaleString` call of a process loads ICU's number formatting,
 * 23–29 ms of CPU on the development VM, on every `scan` (its readiness summary counts the events read; docs/performance.md
 * "Prefilter anchors and start-up"). Other numbers (fractions, non-finite, -0) go to `toLocaleString` itself.
 */
export function groupedNumber(n: number): string {
  if (!Number.isSafeInteger(n) || Object.is(n, -0)) return n.toLocaleString('en-US');
  const digits = String(Math.abs(n));
  let out = digits.slice(0, ((digits.length - 1) % 3) + 1);
  for (let i = out.length; i < digits.length; i += 3) out += `,${digits.slice(i, i + 3)}`;
  return n < 0 ? `-${out}` : out;
}

/**
 * `n` and the noun in the number that fits: `one` when `n` is 1, else `many` (default: `one` + `s`).
 * @param n a count (any finite number; shown with en-US grouping)
 */
export function countOf(n: number, one: string, many = `${one}s`): string {
  return `${groupedNumber(n)} ${n === 1 ? one : many}`;
}
