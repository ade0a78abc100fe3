/**
 * Kubernetes name grammars, one definition each: cluster names, namespaces (the audit parser's ServiceAccount
 * usernames, src/audit/annotations.ts) and the approval policy's namespace patterns.
 */

/**
 * DNS-1123 label: lowercase letters, digits and `-`, starting and ending with a letter or digit, at most 63
 * characters (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names).
 * `serve` requires cluster names to be one; a ServiceAccount's namespace is one.
 */
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** What a DNS-1123 label is, in the words errors and warnings use. */
export const DNS1123_LABEL_WORDS = 'a DNS-1123 label: lowercase letters, digits and "-", at most 63 characters';

/**
 * A namespace pattern of the approval policy (`protectedNamespaces`, `namespaces.allow`/`deny`): a namespace name
 * (a DNS-1123 label), a prefix ending in `*` (`kube-*`, `team*`), or `*` alone. Matched by `matchesNamespace` in
 * src/approvals/policy.ts.
 */
export const NAMESPACE_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$|^([a-z0-9][-a-z0-9]*)?\*$/;

/** What {@link NAMESPACE_PATTERN} accepts, in the words errors use. */
export const NAMESPACE_PATTERN_WORDS = 'a namespace name, or a prefix ending in * (kube-*)';
