/**
 * TokenReview (`POST /apis/authentication.k8s.io/v1/tokenreviews`) for the loopback Kubernetes fake, added through
 * its reactor hook, and the pod-bound ServiceAccount tokens it answers for — as a kubelet requests them for a
 * projected volume. Behaviour as in the API server
 * (https://kubernetes.io/docs/reference/kubernetes-api/authentication-resources/token-review-v1/): an unknown token,
 * a token for none of `spec.audiences`, an expired token, or one whose pod no longer exists with the bound uid →
 * `authenticated: false` with an `error`; otherwise the ServiceAccount user with the extras
 * `authentication.kubernetes.io/pod-name`, `pod-uid`, `credential-id` and, unless `withNodeInfo: false` (clusters
 * before Kubernetes 1.30), `node-name`/`node-uid` recorded when the token was issued.
 */
import { ErrorCode, TokenwatchError } from '../../errors.js';
import { randomBytes } from 'node:crypto';
import type { FakeKube } from './kubernetes.js';
import type { KubeObject } from './kubernetes/types.js';

interface Issued {
  namespace: string;
  serviceAccount: string;
  pod: string;
  podUid: string;
  node: string | undefined;
  audiences: string[];
  expiresAt: number;
  withNodeInfo: boolean;
}

/** Issuing tokens the fake's TokenReview knows. */
export interface FakeTokenIssuer {
  /**
   * A token bound to the pod `namespace/pod` (which must exist in the fake), for its ServiceAccount.
   * @throws TokenwatchError when the pod does not exist
   */
  issue(o: { namespace: string; pod: string; audience: string; expiresAt?: number; withNodeInfo?: boolean }): string;
  /** Stops answering TokenReviews. */
  remove(): void;
}

/** Adds TokenReview to `kube`. `now` is the fake's clock (epoch ms, default `Date.now`). */
export function serveTokenReviews(kube: FakeKube, now: () => number = Date.now): FakeTokenIssuer {
  const tokens = new Map<string, Issued>();
  const remove = kube.addReactor((req, store) => {
    if (req.method !== 'POST' || req.path !== '/apis/authentication.k8s.io/v1/tokenreviews') return undefined;
    const spec = ((req.body as { spec?: { token?: unknown; audiences?: unknown } } | undefined)?.spec ?? {}) as { token?: unknown; audiences?: unknown };
    const wanted = Array.isArray(spec.audiences) && spec.audiences.length ? (spec.audiences as string[]) : ['https://kubernetes.default.svc'];
    const t = typeof spec.token === 'string' ? tokens.get(spec.token) : undefined;
    const answer = (status: Record<string, unknown>) => ({ code: 201, body: { kind: 'TokenReview', apiVersion: 'authentication.k8s.io/v1', metadata: {}, spec: { token: spec.token, audiences: wanted }, status } });
    if (!t) return answer({ authenticated: false, user: {}, error: 'invalid bearer token' });
    const audiences = t.audiences.filter((a) => wanted.includes(a));
    if (!audiences.length) return answer({ authenticated: false, user: {}, error: 'token audiences is invalid for the target audiences' });
    if (now() >= t.expiresAt) return answer({ authenticated: false, user: {}, error: 'service account token has expired' });
    const pod = store.get('Pod', t.namespace, t.pod) as (KubeObject & { metadata?: { uid?: string } }) | undefined;
    if (!pod || pod.metadata?.uid !== t.podUid) return answer({ authenticated: false, user: {}, error: 'service account token has been invalidated' });
    const extra: Record<string, string[]> = {
      'authentication.kubernetes.io/pod-name': [t.pod],
      'authentication.kubernetes.io/pod-uid': [t.podUid],
      'authentication.kubernetes.io/credential-id': [`JTI=${spec.token as string}`.slice(0, 40)],
    };
    if (t.withNodeInfo && t.node) {
      extra['authentication.kubernetes.io/node-name'] = [t.node];
      extra['authentication.kubernetes.io/node-uid'] = [`node-uid-${t.node}`];
    }
    return answer({
      authenticated: true,
      audiences,
      user: { username: `system:serviceaccount:${t.namespace}:${t.serviceAccount}`, uid: `sa-${t.serviceAccount}`, groups: ['system:serviceaccounts', `system:serviceaccounts:${t.namespace}`, 'system:authenticated'], extra },
    });
  });
  return {
    issue(o) {
      const pod = kube.store.get('Pod', o.namespace, o.pod) as (KubeObject & { metadata?: { uid?: string }; spec?: { nodeName?: string; serviceAccountName?: string } }) | undefined;
      if (!pod) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `no pod ${o.namespace}/${o.pod} in the fake`);
      const token = randomBytes(24).toString('base64url');
      tokens.set(token, {
        namespace: o.namespace,
        serviceAccount: pod.spec?.serviceAccountName ?? 'default',
        pod: o.pod,
        podUid: pod.metadata?.uid ?? '',
        node: pod.spec?.nodeName,
        audiences: [o.audience],
        expiresAt: o.expiresAt ?? now() + 3_600_000,
        withNodeInfo: o.withNodeInfo ?? true,
      });
      return token;
    },
    remove,
  };
}
