/** Test helper: real RS256-signed ServiceAccount tokens (bound and legacy claim shapes), signed in the test. */
import { createSign, generateKeyPairSync } from 'node:crypto';

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });

const b64 = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url');

/** Signs `payload` as a compact JWS (RS256). */
export function signJwt(payload: object): string {
  const input = `${b64({ alg: 'RS256', kid: 'test-key' })}.${b64(payload)}`;
  const sig = createSign('RSA-SHA256').update(input).sign(privateKey).toString('base64url');
  return `${input}.${sig}`;
}

/** A kubelet-requested bound token (kubernetes pkg/serviceaccount/claims.go), issued at `iat` (epoch s). */
export function boundToken(o: { iat: number; namespace?: string; sa?: string; saUid?: string; pod?: string; node?: string; expSeconds?: number }): string {
  const iat = o.iat;
  return signJwt({
    aud: ['https://kubernetes.default.svc'],
    exp: iat + (o.expSeconds ?? 7_776_000),
    iat,
    iss: 'https://oidc.eks.us-east-1.amazonaws.com/id/TEST',
    jti: 'c0ffee00-0000-4000-8000-000000000001',
    'kubernetes.io': {
      namespace: o.namespace ?? 'kube-system',
      node: { name: o.node ?? 'ip-192-168-14-201.ec2.internal', uid: 'node-uid-1' },
      pod: { name: o.pod ?? 'kube-multus-ds-zwh6w', uid: 'pod-uid-1' },
      serviceaccount: { name: o.sa ?? 'multus', uid: o.saUid ?? 'sa-uid-1' },
      warnafter: iat + 3607,
    },
    nbf: iat,
    sub: `system:serviceaccount:${o.namespace ?? 'kube-system'}:${o.sa ?? 'multus'}`,
  });
}

/** A legacy Secret-based token (kubernetes pkg/serviceaccount/legacy.go). */
export function legacyToken(o: { namespace: string; sa: string; secret: string }): string {
  return signJwt({
    iss: 'kubernetes/serviceaccount',
    'kubernetes.io/serviceaccount/namespace': o.namespace,
    'kubernetes.io/serviceaccount/secret.name': o.secret,
    'kubernetes.io/serviceaccount/service-account.name': o.sa,
    'kubernetes.io/serviceaccount/service-account.uid': 'legacy-sa-uid',
    sub: `system:serviceaccount:${o.namespace}:${o.sa}`,
  });
}

/** A kubeconfig as the Multus thin plugin writes it, with the token inline. */
export function multusKubeconfig(token: string): string {
  return `# Kubeconfig file for Multus CNI plugin.
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://[10.100.0.1]:443
    certificate-authority-data: LS0tLS1CRUdJTi0tLS0t
users:
- name: multus
  user:
    token: "${token}"
contexts:
- name: multus-context
  context:
    cluster: local
    user: multus
current-context: multus-context
`;
}
