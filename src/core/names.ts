/**
 * Kubernetes name grammars, one definition each: cluster names, namespaces (the audit parser's ServiceAccount
 * usernames, src/audit/annotations.ts; the node probe's reports, src/probe/verify.ts), object names (DNS-1123
 * subdomains) and the approval policy's namespace patterns.
 */

/**
 * DNS-1123 label: lowercase letters, digits and `-`, starting and ending with a letter or digit, at most 63
 * characters (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names).
 * `serve` requires cluster names to be one; a ServiceAccount's namespace is one.
 */
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** What a DNS-1123 label is, in the words errors and warnings use. */
export const DNS1123_LABEL_WORDS = 'a DNS-1123 label: lowercase letters, digits and "-", at most 63 characters';

/** Whether `s` is a {@link DNS1123_LABEL} string (e.g. a namespace name from an untrusted report). */
export function isDns1123Label(s: unknown): s is string {
  return typeof s === 'string' && DNS1123_LABEL.test(s);
}

/** The {@link DNS1123_LABEL} grammar without its length limit: one dot-separated part of a DNS-1123 subdomain. */
const SUBDOMAIN_PART = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * Whether `s` is a DNS-1123 subdomain: dot-separated parts of the label grammar, 1 to 253 characters in all, as most
 * object names are (pods, nodes, ServiceAccounts, Secrets;
 * https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-subdomain-names).
 */
export function isDns1123Subdomain(s: unknown): s is string {
  return typeof s === 'string' && s.length > 0 && s.length <= 253 && s.split('.').every((p) => SUBDOMAIN_PART.test(p));
}

/**
 * A namespace pattern of the approval policy (`protectedNamespaces`, `namespaces.allow`/`deny`): a namespace name
 * (a DNS-1123 label), a prefix ending in `*` (`kube-*`, `team*`), or `*` alone. Matched by `matchesNamespace` in
 * src/approvals/policy.ts.
 */
export const NAMESPACE_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$|^([a-z0-9][-a-z0-9]*)?\*$/;

/** What {@link NAMESPACE_PATTERN} accepts, in the words errors use. */
export const NAMESPACE_PATTERN_WORDS = 'a namespace name, or a prefix ending in * (kube-*)';
