/**
 * English count phrases for messages: `1 sample`, `2 samples`, `1,234 lines` (numbers grouped as en-US).
 */

/**
 * `n` and the noun in the number that fits: `one` when `n` is 1, else `many` (default: `one` + `s`).
 * @param n a count (any finite number; shown with en-US grouping)
 */
export function countOf(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;
}
