/**
 * ServiceAccount token claims, read without verifying and without keeping the token: only the JWT payload (the
 * middle part) is decoded; the header and the signature are never looked at, stored or returned. Pure.
 *
 * Claim shapes (kubernetes `pkg/serviceaccount/claims.go` for bound tokens, `pkg/serviceaccount/legacy.go` for
 * Secret-based ones):
 * - bound: `iss`, `iat`, `exp`, `nbf`, `sub`, and `kubernetes.io: {namespace, serviceaccount{name,uid},
 *   pod{name,uid}?, secret{…}?, node{name,uid}?, warnafter?}`; `warnafter` only on kubelet-requested tokens whose
 *   expiry the API server extended (`--service-account-extend-token-expiration`); `exp` is then the extended
 *   expiry, the moment the API server stops accepting the token.
 * - legacy: `iss: kubernetes/serviceaccount`, flat `kubernetes.io/serviceaccount/{namespace, secret.name,
 *   service-account.name, service-account.uid}`, no `exp`, no `warnafter` (no rejection date).
 */

/** What tokenwatch keeps of a token: owner and times, never the token. Times are epoch ms UTC. */
export interface TokenClaims {
  kind: 'bound' | 'legacy';
  issuer: string | null;
  namespace: string;
  serviceAccount: string;
  serviceAccountUid: string | null;
  pod: string | null;
  podUid: string | null;
  node: string | null;
  /** Legacy tokens: the Secret holding them. */
  secretName: string | null;
  issuedAt: number | null;
  expiresAt: number | null;
  warnAfter: number | null;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const secs = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? Math.round(v * 1000) : null);

/** Whether `s` looks like a compact JWS (three base64url parts); says nothing about validity. */
export function looksLikeJwt(s: string): boolean {
  return /^[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*$/.test(s);
}

/**
 * Decodes the claims of a ServiceAccount token. Returns undefined for anything that is not a JWT with a
 * ServiceAccount owner (never throws; the error would risk echoing the input).
 */
export function tokenClaims(token: string): TokenClaims | undefined {
  const t = token.trim();
  if (!looksLikeJwt(t)) return undefined;
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(t.split('.')[1]!, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!isObj(payload)) return undefined;
  const k8s = payload['kubernetes.io'];
  if (isObj(k8s)) {
    const sa = isObj(k8s['serviceaccount']) ? k8s['serviceaccount'] : {};
    const pod = isObj(k8s['pod']) ? k8s['pod'] : {};
    const node = isObj(k8s['node']) ? k8s['node'] : {};
    const namespace = str(k8s['namespace']);
    const name = str(sa['name']);
    if (namespace === null || name === null) return undefined;
    return {
      kind: 'bound',
      issuer: str(payload['iss']),
      namespace,
      serviceAccount: name,
      serviceAccountUid: str(sa['uid']),
      pod: str(pod['name']),
      podUid: str(pod['uid']),
      node: str(node['name']),
      secretName: null,
      issuedAt: secs(payload['iat']),
      expiresAt: secs(payload['exp']),
      warnAfter: secs(k8s['warnafter']),
    };
  }
  const ns = str(payload['kubernetes.io/serviceaccount/namespace']);
  const name = str(payload['kubernetes.io/serviceaccount/service-account.name']);
  if (ns === null || name === null) return undefined;
  return {
    kind: 'legacy',
    issuer: str(payload['iss']),
    namespace: ns,
    serviceAccount: name,
    serviceAccountUid: str(payload['kubernetes.io/serviceaccount/service-account.uid']),
    pod: null,
    podUid: null,
    node: null,
    secretName: str(payload['kubernetes.io/serviceaccount/secret.name']),
    issuedAt: secs(payload['iat']),
    expiresAt: null,
    warnAfter: null,
  };
}
