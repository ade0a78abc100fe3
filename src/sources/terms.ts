/**
 * The CloudWatch filter pattern and the Logs Insights filter clause, both built from the one list of terms
 * ({@link TOKEN_USE_TERMS}, `src/audit/terms.ts`) that also gives the file prefilter its needles, so the CloudWatch
 * filter, both Logs Insights queries and the file prefilter select the same events.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { TOKEN_USE_TERMS } from '../audit/terms.js';

export { TOKEN_USE_TERMS };

/**
 * Quotes one term for a CloudWatch Logs filter pattern: terms with non-alphanumeric characters must be in double
 * quotes; inner `"` and `\` are backslash-escaped (AWS "Filter pattern syntax"; aws-cdk `aws-logs/lib/pattern.ts`
 * `quoteTerm`).
 */
export function quoteFilterTerm(term: string): string {
  return '"' + term.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"';
}

/**
 * A CloudWatch Logs filter pattern that matches events containing ANY of `terms`: each term quoted and prefixed
 * with `?` (the documented OR form, e.g. `?ERROR ?Exception`; aws-cdk `FilterPattern.anyTerm` renders
 * `?"a" ?"b"`). A single term is sent quoted without `?`.
 *
 * JSON selectors (`{ $.annotations... }`) are not used: they cannot address a key with dots and slashes such as
 * `authentication.k8s.io/stale-token` (docs/design/domain.md §4).
 */
export function anyTermFilterPattern(terms: readonly string[] = TOKEN_USE_TERMS): string {
  if (terms.length === 0) throw new TokenwatchError(ErrorCode.Internal, 'anyTermFilterPattern: at least one term is required');
  if (terms.length === 1) return quoteFilterTerm(terms[0] as string);
  return terms.map((t) => '?' + quoteFilterTerm(t)).join(' ');
}

/**
 * The filter pattern the CloudWatch source sends:
 * `?"authentication.k8s.io/stale-token" ?"authentication.k8s.io/legacy-token" ?"Authentication failed" ?"Unauthorized"`.
 */
export const TOKEN_USE_FILTER_PATTERN = anyTermFilterPattern(TOKEN_USE_TERMS);

/**
 * A Logs Insights `filter` clause that keeps events whose `@message` contains ANY of `terms`:
 * `filter @message like "t1" or @message like "t2" …` (`like "string"` is a substring match, Logs Insights query
 * syntax, "filter"). Terms hold no `"` or `\` (`src/audit/terms.ts`); one that did is refused.
 * @throws TokenwatchError(Internal) for no terms or a term with `"` or `\`
 */
export function anyTermInsightsFilter(terms: readonly string[] = TOKEN_USE_TERMS): string {
  if (terms.length === 0) throw new TokenwatchError(ErrorCode.Internal, 'anyTermInsightsFilter: at least one term is required');
  for (const t of terms) {
    if (/["\\]/.test(t)) throw new TokenwatchError(ErrorCode.Internal, `anyTermInsightsFilter: term ${JSON.stringify(t)} holds a quote or backslash`);
  }
  return 'filter ' + terms.map((t) => `@message like "${t}"`).join(' or ');
}
