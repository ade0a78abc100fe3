/**
 * The API requests of the example cluster over the logged window, as one list of {@link Req}: normal traffic
 * (kubelets, control plane, controllers, CoreDNS, kube-proxy, aws-node, Flux, CronJob churn) plus the stories
 * (Multus stale tokens and the 401s they end in, Flux helm-controller, Fluent Bit, the CI legacy token).
 * The log is thinned: a real cluster writes thousands of events per minute; this keeps a representative sample
 * with realistic shapes, users, user agents and timings.
 */
import { Rng } from './rng.js';
import { MINUTE, SECOND, HOUR, ms } from './format.js';
import {
  ACCOUNT,
  CONTROL_PLANE_IPS,
  REFERENCE_TIME,
  UA,
  WINDOW_START,
  currentToken,
  saUsername,
  tokenFor,
  type BoundToken,
  type ClusterModel,
  type NodeModel,
  type PodModel,
  type SaModel,
} from './model.js';

/** `user` of an audit event (authentication.k8s.io/v1 UserInfo; `extra` keys sorted as Go marshals a map). */
export interface UserInfo {
  username?: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

/** `objectRef` of an audit event. */
export interface ObjectRef {
  resource?: string;
  namespace?: string;
  name?: string;
  apiGroup?: string;
  apiVersion?: string;
  subresource?: string;
}

/** Story a token use belongs to (ids used in `expected.json`). */
export type StoryId = 'multus' | 'flux-helm-controller' | 'fluent-bit' | 'legacy-deployer' | 'multus-401';

/** Why a request is a token use worth reporting. */
export type Signal =
  | { kind: 'stale'; story: StoryId; token: BoundToken }
  | { kind: 'legacy'; story: StoryId }
  | { kind: 'unauthorized'; story: StoryId };

/** One API request; rendered to one to three audit events (one per stage). Times in epoch microseconds. */
export interface Req {
  auditID: string;
  /** `requestReceivedTimestamp`, epoch µs. */
  t: number;
  /** Time to the response (ResponseComplete, or ResponseStarted for watches), µs. */
  latencyUs: number;
  verb: string;
  uri: string;
  objectRef?: ObjectRef;
  user: UserInfo;
  sourceIP: string;
  userAgent: string;
  code: number;
  /** Error status details for non-2xx responses (copied into `responseStatus`). */
  failure?: { message: string; reason: string; details?: Record<string, string> };
  /** Annotations set during authentication (present from RequestReceived on). */
  authn: Record<string, string>;
  /** Authorization decision (absent for requests that failed authentication). */
  authz?: { decision: string; reason: string };
  /** Annotations set by the handler (pod security, issued credential id): response stages only. */
  handlerAnnotations?: Record<string, string>;
  /** Watch duration, µs: logs RequestReceived, ResponseStarted, then ResponseComplete after this long. */
  watchUs?: number;
  /** `failed-authn`: one ResponseStarted event (authn_audit.go); `in-flight`: only RequestReceived was written. */
  mode?: 'failed-authn' | 'in-flight';
  signal?: Signal;
}

/** Audit annotation keys (kubernetes `pkg/serviceaccount/claims.go`, `legacy.go`, apiserver authorization filter). */
export const ANN = {
  stale: 'authentication.k8s.io/stale-token',
  legacy: 'authentication.k8s.io/legacy-token',
  legacyManual: 'authentication.k8s.io/legacy-token-manual-secret',
  issued: 'authentication.kubernetes.io/issued-credential-id',
  decision: 'authorization.k8s.io/decision',
  reason: 'authorization.k8s.io/reason',
  podSecurity: 'pod-security.kubernetes.io/enforce-policy',
} as const;

/** Go format `"subject: %s, seconds after warning threshold: %d"` (kubernetes `pkg/serviceaccount/claims.go`). */
export function staleAnnotation(subject: string, seconds: number): string {
  return `subject: ${subject}, seconds after warning threshold: ${seconds}`;
}

/** The API server caches token authentication results (and their audit annotations) for 10 s (`cached_token_authenticator.go`). */
const AUTH_CACHE_US = 10_000_000;

/** Parses a request URI into an audit `objectRef` the way the RequestInfo resolver does (resource requests only). */
export function objectRefFromUri(uri: string): ObjectRef | undefined {
  const path = uri.split('?')[0] ?? '';
  const parts = path.split('/').filter((p) => p !== '');
  let group = '';
  let version: string;
  let rest: string[];
  if (parts[0] === 'api') {
    version = parts[1] ?? '';
    rest = parts.slice(2);
  } else if (parts[0] === 'apis') {
    group = parts[1] ?? '';
    version = parts[2] ?? '';
    rest = parts.slice(3);
  } else return undefined;
  const ref: ObjectRef = {};
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    ref.namespace = rest[1];
    rest = rest.slice(2);
  } else if (rest[0] === 'namespaces' && rest.length <= 2) {
    ref.resource = 'namespaces';
    if (rest[1]) ref.name = rest[1];
    ref.apiVersion = version;
    return ref;
  }
  ref.resource = rest[0];
  if (rest[1]) ref.name = rest[1];
  if (group) ref.apiGroup = group;
  ref.apiVersion = version;
  if (rest[2]) ref.subresource = rest[2];
  return ref;
}

function orderedRef(ref: ObjectRef): ObjectRef {
  // Field order of audit.k8s.io/v1 ObjectReference: resource, namespace, name, uid, apiGroup, apiVersion, resourceVersion, subresource.
  const o: ObjectRef = {};
  if (ref.resource) o.resource = ref.resource;
  if (ref.namespace) o.namespace = ref.namespace;
  if (ref.name) o.name = ref.name;
  if (ref.apiGroup) o.apiGroup = ref.apiGroup;
  if (ref.apiVersion) o.apiVersion = ref.apiVersion;
  if (ref.subresource) o.subresource = ref.subresource;
  return o;
}

function sortedExtra(extra: Record<string, string[]>): Record<string, string[]> {
  return Object.fromEntries(Object.keys(extra).sort().map((k) => [k, extra[k] as string[]]));
}

/** `user` of a ServiceAccount token; pod-bound tokens carry the pod/node/credential extras (kubernetes 1.30+). */
export function saUser(sa: SaModel, token?: BoundToken, credentialOnly?: string): UserInfo {
  const u: UserInfo = {
    username: saUsername(sa),
    uid: sa.uid,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${sa.namespace}`, 'system:authenticated'],
  };
  if (token) {
    u.extra = sortedExtra({
      'authentication.kubernetes.io/credential-id': [token.credentialId],
      'authentication.kubernetes.io/node-name': [token.pod.node.name],
      'authentication.kubernetes.io/node-uid': [token.pod.node.uid],
      'authentication.kubernetes.io/pod-name': [token.pod.name],
      'authentication.kubernetes.io/pod-uid': [token.pod.uid],
    });
  } else if (credentialOnly) {
    u.extra = { 'authentication.kubernetes.io/credential-id': [credentialOnly] };
  }
  return u;
}

/** RBAC authorizer reason strings (kubernetes `plugin/pkg/auth/authorizer/rbac/rbac.go`, `describeSubject`). */
const rbac = {
  crb: (binding: string, role: string, subject: string): string =>
    `RBAC: allowed by ClusterRoleBinding "${binding}" of ClusterRole "${role}" to ${subject}`,
  rb: (binding: string, ns: string, role: string, subject: string): string =>
    `RBAC: allowed by RoleBinding "${binding}/${ns}" of Role "${role}" to ${subject}`,
  sa: (sa: SaModel): string => `ServiceAccount "${sa.name}/${sa.namespace}"`,
  user: (name: string): string => `User "${name}"`,
};
const allow = (reason: string): { decision: string; reason: string } => ({ decision: 'allow', reason });

/** Builds all requests of the logged window. */
export function buildRequests(model: ClusterModel, rng: Rng): Req[] {
  const r = rng.fork('traffic');
  const reqs: Req[] = [];
  const end = REFERENCE_TIME;
  const { node, sa } = model.ref;
  const mustSa = (key: string): SaModel => {
    const s = sa[key];
    if (!s) throw new Error(`no ServiceAccount ${key}`);
    return s;
  };

  /** Adds one request at `t` (epoch ms, fractional allowed). */
  const add = (t: number, fields: Omit<Req, 'auditID' | 't' | 'latencyUs' | 'code' | 'authn' | 'objectRef'> & Partial<Req>): Req => {
    const tUs = Math.round(t * 1000) + r.int(0, 999);
    const ref = fields.objectRef ?? objectRefFromUri(fields.uri);
    const req: Req = {
      auditID: r.uuid(),
      t: tUs,
      latencyUs: r.int(1_800, 28_000),
      code: fields.verb === 'create' ? 201 : 200,
      authn: {},
      ...fields,
    };
    if (ref) req.objectRef = orderedRef(ref);
    else delete req.objectRef;
    if (req.t >= end * 1000 && req.mode !== 'in-flight') return req; // beyond the cut: never logged
    reqs.push(req);
    return req;
  };
  /** Jittered schedule: roughly every `meanMs` between `from` and `to`. */
  const every = (from: number, to: number, meanMs: number, f: (t: number, i: number) => void): void => {
    let t = from + r.next() * meanMs;
    let i = 0;
    while (t < to) {
      f(t, i++);
      t += meanMs * (0.6 + 0.8 * r.next());
    }
  };
  const cp = (): string => r.pick(CONTROL_PLANE_IPS);

  // ------------------------------------------------------------------ identities
  const nodeRole = (n: NodeModel): { name: string; id: string } =>
    n.nodegroup === 'ng-batch'
      ? { name: 'eksctl-prod-eks-nodegroup-ng-batch-NodeInstanceRole-7QW2PLM3XK1B', id: 'AROAYEXAMPLEBATCH0001' }
      : { name: 'eksctl-prod-eks-nodegroup-ng-gener-NodeInstanceRole-4XG1D7KJ2QZ8', id: 'AROAYEXAMPLEGENERAL01' };
  const accessKey = (who: string, t: number): string =>
    'ASIAYEXAMPLE' + new Rng(`akid/${who}/${Math.floor(t / (6 * HOUR))}`).chars(8, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567');
  const kubeletUser = (n: NodeModel, t: number): UserInfo => {
    const role = nodeRole(n);
    return {
      username: `system:node:${n.name}`,
      uid: `aws-iam-authenticator:${ACCOUNT}:${role.id}`,
      groups: ['system:bootstrappers', 'system:nodes', 'system:authenticated'],
      extra: sortedExtra({
        accessKeyId: [accessKey(n.name, t)],
        arn: [`arn:aws:sts::${ACCOUNT}:assumed-role/${role.name}/${n.instanceId}`],
        canonicalArn: [`arn:aws:iam::${ACCOUNT}:role/${role.name}`],
        principalId: [role.id],
        sessionName: [n.instanceId],
      }),
    };
  };
  const adminArn = `arn:aws:sts::${ACCOUNT}:assumed-role/PlatformAdmin/jane.doe`;
  const adminUser = (t: number): UserInfo => ({
    username: adminArn,
    uid: `aws-iam-authenticator:${ACCOUNT}:AROAYEXAMPLEADMIN0001`,
    groups: ['system:authenticated'],
    extra: sortedExtra({
      accessKeyId: [accessKey('admin', t)],
      arn: [adminArn],
      canonicalArn: [`arn:aws:iam::${ACCOUNT}:role/PlatformAdmin`],
      principalId: ['AROAYEXAMPLEADMIN0001'],
      sessionName: ['jane.doe'],
    }),
  });
  const adminAuthz = allow(
    `EKS Access Policy: allowed by ClusterRoleBinding "arn:aws:iam::${ACCOUNT}:role/PlatformAdmin+arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy" of ClusterRole "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy" to User "${adminArn}"`,
  );
  const kcmUser: UserInfo = { username: 'system:kube-controller-manager', groups: ['system:authenticated'] };
  const schedUser: UserInfo = { username: 'system:kube-scheduler', groups: ['system:authenticated'] };
  /** A kube-controller-manager controller using its own ServiceAccount (`--use-service-account-credentials`). */
  const controller = (name: string, t: number): Pick<Req, 'user' | 'userAgent' | 'sourceIP' | 'authz'> => {
    const s = mustSa(`kube-system/${name}`);
    const cred = `JTI=${new Rng(`ctrl-jti/${name}/${Math.floor(t / HOUR)}`).uuid()}`;
    return {
      user: saUser(s, undefined, cred),
      userAgent: `${UA.kcm}/${saUsername(s)}`,
      sourceIP: CONTROL_PLANE_IPS[0],
      authz: allow(rbac.crb(`system:controller:${name}`, `system:controller:${name}`, rbac.sa(s))),
    };
  };
  const podAuthz = (p: PodModel): { decision: string; reason: string } => {
    const s = p.sa;
    const bindings: Record<string, [string, string]> = {
      'kube-system/multus': ['multus', 'multus'],
      'kube-system/coredns': ['system:coredns', 'system:coredns'],
      'kube-system/kube-proxy': ['eks:kube-proxy', 'system:node-proxier'],
      'kube-system/aws-node': ['aws-node', 'aws-node'],
      'logging/fluent-bit': ['fluent-bit', 'fluent-bit'],
      'flux-system/helm-controller': ['cluster-reconciler-flux-system', 'cluster-admin'],
      'flux-system/source-controller': ['crd-controller-flux-system', 'crd-controller-flux-system'],
    };
    const b = bindings[`${s.namespace}/${s.name}`];
    if (!b) throw new Error(`no binding for ${s.namespace}/${s.name}`);
    return allow(rbac.crb(b[0], b[1], rbac.sa(s)));
  };
  /** A request made with the token the kubelet currently mounts in `p` (fresh: never annotated). */
  const fromPod = (p: PodModel, t: number, userAgent: string): Pick<Req, 'user' | 'userAgent' | 'sourceIP' | 'authz'> => ({
    user: saUser(p.sa, currentToken(p, t)),
    userAgent,
    sourceIP: p.ip,
    authz: podAuthz(p),
  });
  /** A request made with a fixed, stale token (the client kept it). */
  const withStale = (token: BoundToken, story: StoryId, userAgent: string, sourceIP: string): Pick<Req, 'user' | 'userAgent' | 'sourceIP' | 'authz' | 'signal'> => ({
    user: saUser(token.pod.sa, token),
    userAgent,
    sourceIP,
    authz: podAuthz(token.pod),
    signal: { kind: 'stale', story, token },
  });

  // ------------------------------------------------------------------ kubelets
  for (const n of model.nodes) {
    const nodeAuthz = allow('');
    every(WINDOW_START, end, 130 * MINUTE, (t) =>
      add(t, {
        verb: 'update',
        uri: `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${n.name}?timeout=10s`,
        user: kubeletUser(n, t),
        sourceIP: n.ip,
        userAgent: n.kubeletUserAgent,
        authz: nodeAuthz,
      }),
    );
    every(WINDOW_START, end, 240 * MINUTE, (t) =>
      add(t, {
        verb: 'patch',
        uri: `/api/v1/nodes/${n.name}/status?timeout=10s`,
        user: kubeletUser(n, t),
        sourceIP: n.ip,
        userAgent: n.kubeletUserAgent,
        authz: nodeAuthz,
      }),
    );
  }

  // ------------------------------------------------------------------ control plane
  every(WINDOW_START, end, 20 * MINUTE, (t) =>
    add(t, {
      verb: 'update',
      uri: '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager?timeout=5s',
      user: kcmUser,
      sourceIP: CONTROL_PLANE_IPS[0],
      userAgent: `${UA.kcm}/leader-election`,
      authz: allow(rbac.crb('system:kube-controller-manager', 'system:kube-controller-manager', rbac.user('system:kube-controller-manager'))),
    }),
  );
  every(WINDOW_START, end, 20 * MINUTE, (t) =>
    add(t, {
      verb: 'update',
      uri: '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler?timeout=5s',
      user: schedUser,
      sourceIP: CONTROL_PLANE_IPS[1],
      userAgent: `${UA.scheduler}/leader-election`,
      authz: allow(rbac.crb('system:kube-scheduler', 'system:kube-scheduler', rbac.user('system:kube-scheduler'))),
    }),
  );
  const kubeDnsSlice = `kube-dns-${r.suffix(5)}`;
  every(WINDOW_START, end, 120 * MINUTE, (t) =>
    add(t, {
      verb: 'update',
      uri: `/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/${kubeDnsSlice}`,
      ...controller('endpointslice-controller', t),
    }),
  );
  every(WINDOW_START, end, 15 * MINUTE, (t) =>
    add(t, {
      verb: 'get',
      uri: '/metrics',
      user: { username: 'eks:k8s-metrics', groups: ['system:authenticated'] },
      sourceIP: cp(),
      userAgent: UA.metrics,
      authz: allow(rbac.crb('eks:k8s-metrics', 'eks:k8s-metrics', rbac.user('eks:k8s-metrics'))),
    }),
  );
  every(WINDOW_START, end, 180 * MINUTE, (t) =>
    add(t, {
      verb: 'list',
      uri: '/api/v1/nodes?limit=500&resourceVersion=0',
      user: { username: 'eks:cloud-controller-manager', groups: ['system:authenticated'] },
      sourceIP: cp(),
      userAgent: UA.cloudController,
      authz: allow(rbac.crb('eks:cloud-controller-manager', 'eks:cloud-controller-manager', rbac.user('eks:cloud-controller-manager'))),
    }),
  );

  // ------------------------------------------------------------------ CoreDNS: TokenRequests + watches (fresh tokens)
  let rv = 48_213_377;
  const watchUri = (base: string, ts: number): string => {
    rv += r.int(800, 9000);
    return `${base}${base.includes('?') ? '&' : '?'}allowWatchBookmarks=true&resourceVersion=${rv}&timeout=${Math.floor(ts / 60)}m${ts % 60}s&timeoutSeconds=${ts}&watch=true`;
  };
  for (const p of model.ref.corednsPods) {
    for (let k = 0; ; k++) {
      const tok = tokenFor(p, k);
      if (tok.issuedAt >= end) break;
      if (tok.issuedAt < WINDOW_START) continue;
      add(tok.issuedAt + 12 + r.int(0, 30), {
        verb: 'create',
        uri: `/api/v1/namespaces/${p.namespace}/serviceaccounts/${p.sa.name}/token`,
        user: kubeletUser(p.node, tok.issuedAt),
        sourceIP: p.node.ip,
        userAgent: p.node.kubeletUserAgent,
        authz: allow(''),
        handlerAnnotations: { [ANN.issued]: tok.credentialId },
      });
    }
    const resources = ['/apis/discovery.k8s.io/v1/endpointslices', '/api/v1/services', '/api/v1/namespaces'];
    every(WINDOW_START, end, 90 * MINUTE, (t, i) => {
      const ts = r.int(300, 599);
      add(t, { verb: 'watch', uri: watchUri(resources[i % 3] as string, ts), watchUs: ts * 1_000_000 + r.int(0, 900_000), ...fromPod(p, t, UA.coredns) });
    });
  }

  // ------------------------------------------------------------------ kube-proxy, aws-node (fresh tokens)
  for (const n of model.nodes) {
    const kp = model.ref.kubeProxyPod[n.label];
    every(WINDOW_START, end, 360 * MINUTE, (t) => {
      const ts = r.int(300, 599);
      add(t, {
        verb: 'watch',
        uri: watchUri('/apis/discovery.k8s.io/v1/endpointslices?labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name', ts),
        watchUs: ts * 1_000_000 + r.int(0, 900_000),
        ...fromPod(kp, t, UA.kubeProxy),
      });
    });
    const an = model.ref.awsNodePod[n.label];
    every(Math.max(WINDOW_START, an.startTime), end, 240 * MINUTE, (t) =>
      add(t, { verb: 'get', uri: `/api/v1/nodes/${n.name}`, ...fromPod(an, t, UA.awsNode) }),
    );
    every(Math.max(WINDOW_START, an.startTime), end, 480 * MINUTE, (t) => {
      const ts = r.int(300, 599);
      add(t, {
        verb: 'watch',
        uri: watchUri(`/apis/networking.k8s.aws/v1alpha1/policyendpoints?fieldSelector=spec.podSelectorEndpoints.nodeName%3D${n.name}`, ts),
        watchUs: ts * 1_000_000 + r.int(0, 900_000),
        ...fromPod(an, t, UA.networkPolicyAgent),
      });
    });
  }

  // ------------------------------------------------------------------ Flux
  const hc = model.ref.helmControllerPod;
  const sc = model.ref.sourceControllerPod;
  every(WINDOW_START, end, 70 * MINUTE, (t) =>
    add(t, { verb: 'update', uri: '/apis/coordination.k8s.io/v1/namespaces/flux-system/leases/5b6ca942.fluxcd.io', ...fromPod(hc, t, UA.helmController) }),
  );
  every(WINDOW_START, end, 70 * MINUTE, (t) =>
    add(t, { verb: 'update', uri: '/apis/coordination.k8s.io/v1/namespaces/flux-system/leases/305740c0.fluxcd.io', ...fromPod(sc, t, UA.sourceController) }),
  );
  every(WINDOW_START, end, 200 * MINUTE, (t, i) =>
    add(t, {
      verb: 'patch',
      uri: `/apis/source.toolkit.fluxcd.io/v1beta2/namespaces/flux-system/helmrepositories/${i % 2 === 0 ? 'fluent' : 'bitnami'}/status`,
      ...fromPod(sc, t, UA.sourceController),
    }),
  );
  // helm-controller < v0.22.0 builds its Helm client once: Helm storage calls present the token from pod start
  // (fluxcd/helm-controller#479); its controller-runtime client (leases, status) reads the rotated file.
  const hcStale = tokenFor(hc, 0);
  const reconciles: Array<[string, 'fluent-bit' | 'redis', string]> = [
    ['2026-11-18T14:37:12.512Z', 'fluent-bit', 'logging'],
    ['2026-11-19T01:37:40.106Z', 'redis', 'shop'],
    ['2026-11-19T09:37:41.733Z', 'fluent-bit', 'logging'],
    ['2026-11-19T19:38:02.318Z', 'redis', 'shop'],
    ['2026-11-20T05:38:15.947Z', 'fluent-bit', 'logging'],
  ];
  for (const [at, rel, ns] of reconciles) {
    const t = ms(at);
    add(t, {
      verb: 'list',
      uri: `/api/v1/namespaces/${ns}/secrets?labelSelector=name%3D${rel}%2Cowner%3Dhelm`,
      ...withStale(hcStale, 'flux-helm-controller', UA.helmController, hc.ip),
    });
    add(t + 640, { verb: 'patch', uri: `/apis/helm.toolkit.fluxcd.io/v2beta1/namespaces/${ns}/helmreleases/${rel}/status`, ...fromPod(hc, t + 640, UA.helmController) });
  }

  // ------------------------------------------------------------------ CronJob churn (CNI ADD/DEL through Multus)
  const multusTokenOn = (n: NodeModel, t: number): { token: BoundToken; stale: boolean } => {
    const replaced = model.ref.multusReplacedPod;
    if (n.label === 'F' && t < model.multusReplacedAt) return { token: tokenFor(replaced, 0), stale: true };
    const p = model.ref.multusPod[n.label];
    // The multus entrypoint copied the token once into /etc/cni/net.d/multus.d/multus.kubeconfig.
    const token = tokenFor(p, 0);
    return { token, stale: t * 1000 >= token.warnAfter * 1000 };
  };
  const multusReq = (n: NodeModel, t: number, fields: Pick<Req, 'verb' | 'uri'> & Partial<Req>): Req => {
    const { token, stale } = multusTokenOn(n, t);
    const base = stale
      ? withStale(token, 'multus', UA.multus, n.ip)
      : { user: saUser(token.pod.sa, token), userAgent: UA.multus, sourceIP: n.ip, authz: podAuthz(token.pod) };
    return add(t, { ...base, ...fields, latencyUs: r.int(2_500, 9_000) });
  };
  const fluentBitGet = (n: NodeModel, t: number, ns: string, podName: string): void => {
    const fb = model.ref.fluentBitPod[n.label];
    add(t, { verb: 'get', uri: `/api/v1/namespaces/${ns}/pods/${podName}`, ...withStale(tokenFor(fb, 0), 'fluent-bit', UA.fluentBit, fb.ip) });
  };
  const podRun = (n: NodeModel, t0: number, job: string, createdBy: 'cronjob' | 'admin', sandboxGc: boolean): void => {
    const podName = `${job}-${r.suffix(5)}`;
    const podUri = `/api/v1/namespaces/shop/pods/${podName}`;
    if (createdBy === 'cronjob') {
      add(t0 + 31, { verb: 'create', uri: '/apis/batch/v1/namespaces/shop/jobs', objectRef: { resource: 'jobs', namespace: 'shop', name: job, apiGroup: 'batch', apiVersion: 'v1' }, ...controller('cronjob-controller', t0) });
    } else {
      add(t0 + 31, { verb: 'create', uri: '/apis/batch/v1/namespaces/shop/jobs?fieldManager=kubectl-create&fieldValidation=Strict', objectRef: { resource: 'jobs', namespace: 'shop', name: job, apiGroup: 'batch', apiVersion: 'v1' }, user: adminUser(t0), sourceIP: '198.51.100.23', userAgent: UA.adminKubectl, authz: adminAuthz });
    }
    add(t0 + 92, { verb: 'create', uri: '/api/v1/namespaces/shop/pods', ...controller('job-controller', t0), handlerAnnotations: { [ANN.podSecurity]: 'privileged:latest' } });
    add(t0 + 131, { verb: 'create', uri: `${podUri}/binding`, user: schedUser, sourceIP: CONTROL_PLANE_IPS[1], userAgent: `${UA.scheduler}/scheduler`, authz: allow(rbac.crb('system:kube-scheduler', 'system:kube-scheduler', rbac.user('system:kube-scheduler'))) });
    const kubelet = (t: number, verb: string, uri: string): void => {
      add(t, { verb, uri, user: kubeletUser(n, t), sourceIP: n.ip, userAgent: n.kubeletUserAgent, authz: allow('') });
    };
    kubelet(t0 + 612, 'patch', `${podUri}/status`);
    // CNI ADD: multus reads the pod's network annotations, then records network-status.
    const add1 = t0 + 1400 + r.int(0, 400);
    multusReq(n, add1, { verb: 'get', uri: podUri });
    multusReq(n, add1 + 38 + r.int(0, 40), { verb: 'update', uri: `${podUri}/status` });
    kubelet(t0 + 3200 + r.int(0, 600), 'patch', `${podUri}/status`);
    fluentBitGet(n, t0 + 4300 + r.int(0, 3000), 'shop', podName);
    const done = t0 + 41_000 + r.int(0, 4000);
    kubelet(done, 'patch', `${podUri}/status`);
    // CNI DEL when the sandbox stops.
    multusReq(n, done + 900 + r.int(0, 300), { verb: 'get', uri: podUri });
    add(done + 1500, { verb: 'update', uri: `/apis/batch/v1/namespaces/shop/jobs/${job}/status`, ...controller('job-controller', done) });
    if (createdBy === 'cronjob')
      add(done + 1580, { verb: 'update', uri: '/apis/batch/v1/namespaces/shop/cronjobs/cart-cleanup/status', ...controller('cronjob-controller', done) });
    const gone = done + 300_000 + 1500;
    add(gone, { verb: 'delete', uri: `/apis/batch/v1/namespaces/shop/jobs/${job}`, ...controller('ttl-after-finished-controller', gone) });
    add(gone + 210, { verb: 'delete', uri: podUri, ...controller('generic-garbage-collector', gone) });
    if (sandboxGc) {
      // Sandbox garbage collection after the pod object is gone: CNI DEL again, the pod lookup 404s.
      const gc = gone + 60_000 + r.int(0, 30_000);
      multusReq(n, gc, {
        verb: 'get',
        uri: podUri,
        code: 404,
        failure: { message: `pods "${podName}" not found`, reason: 'NotFound', details: { name: podName, kind: 'pods' } },
      });
    }
  };
  const cronRuns: Array<[string, NodeModel['label'], boolean]> = [
    ['2026-11-18T12:15:00Z', 'E', false],
    ['2026-11-18T16:15:00Z', 'D', false],
    ['2026-11-18T20:15:00Z', 'B', false],
    ['2026-11-19T00:15:00Z', 'E', true],
    ['2026-11-19T04:15:00Z', 'F', false],
    ['2026-11-19T08:15:00Z', 'A', false],
    ['2026-11-19T12:15:00Z', 'B', false],
    ['2026-11-19T16:15:00Z', 'E', false],
    ['2026-11-19T20:15:00Z', 'C', true],
    ['2026-11-20T00:15:00Z', 'D', false],
    ['2026-11-20T04:15:00Z', 'F', false],
  ];
  for (const [at, label, gc] of cronRuns) {
    const t0 = ms(at) + r.int(20, 90);
    podRun(node[label], t0, `cart-cleanup-${Math.floor(ms(at) / MINUTE)}`, 'cronjob', gc);
  }

  // ------------------------------------------------------------------ CI pipeline with a legacy Secret token
  const deployer = mustSa('ci/deployer');
  const legacy = (t: number, verb: string, uri: string): Req =>
    add(t, {
      verb,
      uri,
      user: saUser(deployer),
      sourceIP: '203.0.113.45',
      userAgent: UA.ciKubectl,
      authn: { [ANN.legacy]: saUsername(deployer), [ANN.legacyManual]: model.ref.deployerSecret.name },
      authz: allow(rbac.rb('deployer', 'shop', 'deployer', rbac.sa(deployer))),
      signal: { kind: 'legacy', story: 'legacy-deployer' },
    });
  legacy(ms('2026-11-18T16:20:31.402Z'), 'list', '/apis/apps/v1/namespaces/shop/deployments?limit=500');
  legacy(ms('2026-11-19T15:42:09.877Z'), 'list', '/apis/apps/v1/namespaces/shop/deployments?limit=500');
  const ro = model.checkoutRolloutAt;
  legacy(ro, 'get', '/apis/apps/v1/namespaces/shop/deployments/checkout');
  legacy(ro + 707, 'patch', '/apis/apps/v1/namespaces/shop/deployments/checkout?fieldManager=kubectl-set');
  const newRs = model.ref.checkoutNewRs;
  add(ro + 752, { verb: 'create', uri: '/apis/apps/v1/namespaces/shop/replicasets', objectRef: { resource: 'replicasets', namespace: 'shop', name: newRs.name, apiGroup: 'apps', apiVersion: 'v1' }, ...controller('deployment-controller', ro) });
  add(ro + 811, { verb: 'update', uri: '/apis/apps/v1/namespaces/shop/deployments/checkout/status', ...controller('deployment-controller', ro) });
  const stuck = model.ref.checkoutStuckPod;
  const stuckUri = `/api/v1/namespaces/shop/pods/${stuck.name}`;
  add(ro + 846, { verb: 'create', uri: '/api/v1/namespaces/shop/pods', ...controller('replicaset-controller', ro), handlerAnnotations: { [ANN.podSecurity]: 'privileged:latest' } });
  add(ro + 899, { verb: 'create', uri: `${stuckUri}/binding`, user: schedUser, sourceIP: CONTROL_PLANE_IPS[1], userAgent: `${UA.scheduler}/scheduler`, authz: allow(rbac.crb('system:kube-scheduler', 'system:kube-scheduler', rbac.user('system:kube-scheduler'))) });
  legacy(ro + 1420, 'get', '/apis/apps/v1/namespaces/shop/deployments/checkout');
  const e = node.E;
  add(ro + 2200, { verb: 'patch', uri: `${stuckUri}/status`, user: kubeletUser(e, ro), sourceIP: e.ip, userAgent: e.kubeletUserAgent, authz: allow('') });
  add(ro + 10 * MINUTE + 3900, { verb: 'update', uri: '/apis/apps/v1/namespaces/shop/deployments/checkout/status', ...controller('deployment-controller', ro + 10 * MINUTE) });

  // ------------------------------------------------------------------ 401s: node E's Multus token is past the EKS limit
  // Each sandbox attempt runs CNI ADD; multus presents the expired token; the API server answers 401 with an
  // audit event that has no user (authn_audit.go). The kubelet retries with back-off.
  const attempts = [3_700, 19_100, 46_300, 101_800];
  let t401 = ro + 101_800 + 11 * MINUTE;
  while (t401 < end - 30 * SECOND) {
    attempts.push(t401 - ro);
    t401 += 12 * MINUTE + r.int(0, 150) * SECOND;
  }
  for (const dt of attempts) {
    add(ro + dt, {
      verb: 'get',
      uri: stuckUri,
      user: {},
      sourceIP: e.ip,
      userAgent: UA.multus,
      latencyUs: r.int(600, 1_900),
      code: 401,
      mode: 'failed-authn',
      signal: { kind: 'unauthorized', story: 'multus-401' },
    });
    if (dt > 100_000) add(ro + dt + 1300, { verb: 'patch', uri: `${stuckUri}/status`, user: kubeletUser(e, ro + dt), sourceIP: e.ip, userAgent: e.kubeletUserAgent, authz: allow('') });
  }

  // ------------------------------------------------------------------ the operator replaces the Multus pod on node F
  const f = node.F;
  const oldPod = model.ref.multusReplacedPod;
  const newPod = model.ref.multusPod.F;
  const del = model.multusReplacedAt;
  add(del - 87_100, { verb: 'list', uri: '/api/v1/namespaces/kube-system/pods?labelSelector=name%3Dmultus&limit=500', user: adminUser(del), sourceIP: '198.51.100.23', userAgent: UA.adminKubectl, authz: adminAuthz });
  add(del - 64_700, { verb: 'get', uri: '/apis/apps/v1/namespaces/kube-system/daemonsets/kube-multus-ds', user: adminUser(del), sourceIP: '198.51.100.23', userAgent: UA.adminKubectl, authz: adminAuthz });
  add(del, { verb: 'delete', uri: `/api/v1/namespaces/kube-system/pods/${oldPod.name}`, user: adminUser(del), sourceIP: '198.51.100.23', userAgent: UA.adminKubectl, authz: adminAuthz });
  add(del + 190, { verb: 'patch', uri: `/api/v1/namespaces/kube-system/pods/${oldPod.name}/status`, user: kubeletUser(f, del), sourceIP: f.ip, userAgent: f.kubeletUserAgent, authz: allow('') });
  add(newPod.createdAt - 240, { verb: 'delete', uri: `/api/v1/namespaces/kube-system/pods/${oldPod.name}`, user: kubeletUser(f, del), sourceIP: f.ip, userAgent: f.kubeletUserAgent, authz: allow('') });
  add(newPod.createdAt, { verb: 'create', uri: '/api/v1/namespaces/kube-system/pods', ...controller('daemon-set-controller', del), handlerAnnotations: { [ANN.podSecurity]: 'privileged:latest' } });
  add(newPod.createdAt + 61, { verb: 'create', uri: `/api/v1/namespaces/kube-system/pods/${newPod.name}/binding`, user: schedUser, sourceIP: CONTROL_PLANE_IPS[1], userAgent: `${UA.scheduler}/scheduler`, authz: allow(rbac.crb('system:kube-scheduler', 'system:kube-scheduler', rbac.user('system:kube-scheduler'))) });
  const newTok = tokenFor(newPod, 0);
  add(newTok.issuedAt + 14, { verb: 'create', uri: '/api/v1/namespaces/kube-system/serviceaccounts/multus/token', user: kubeletUser(f, del), sourceIP: f.ip, userAgent: f.kubeletUserAgent, authz: allow(''), handlerAnnotations: { [ANN.issued]: newTok.credentialId } });
  add(newPod.startTime + 6_400, { verb: 'patch', uri: `/api/v1/namespaces/kube-system/pods/${newPod.name}/status`, user: kubeletUser(f, del), sourceIP: f.ip, userAgent: f.kubeletUserAgent, authz: allow('') });
  add(newPod.startTime + 6_900, { verb: 'update', uri: '/apis/apps/v1/namespaces/kube-system/daemonsets/kube-multus-ds/status', ...controller('daemon-set-controller', del) });
  // The operator checks the fix: a manual run of the CronJob lands on node F; multus now presents a fresh token.
  podRun(f, ms('2026-11-20T11:40:12.310Z'), 'cart-cleanup-manual-1', 'admin', false);
  add(ms('2026-11-20T11:47:30.052Z'), { verb: 'list', uri: '/api/v1/namespaces/shop/pods?labelSelector=job-name%3Dcart-cleanup-manual-1&limit=500', user: adminUser(del), sourceIP: '198.51.100.23', userAgent: UA.adminKubectl, authz: adminAuthz });

  // ------------------------------------------------------------------ the cut: one request in flight at the reference time
  const last = add(end, {
    verb: 'list',
    uri: '/api/v1/namespaces/shop/secrets?labelSelector=name%3Dredis%2Cowner%3Dhelm',
    ...withStale(hcStale, 'flux-helm-controller', UA.helmController, hc.ip),
    mode: 'in-flight',
  });
  last.t = end * 1000;

  applyStaleAnnotations(reqs);
  reqs.sort((a, b) => a.t - b.t);
  return reqs;
}

/**
 * Sets the stale-token annotation on every stale request: `now − warnafter` in whole seconds, where a result
 * cached by the token authenticator (10 s) is reused with its old annotation value.
 */
function applyStaleAnnotations(reqs: Req[]): void {
  const byToken = new Map<string, Req[]>();
  for (const q of reqs) {
    if (q.signal?.kind !== 'stale') continue;
    const key = q.signal.token.credentialId;
    const list = byToken.get(key) ?? [];
    list.push(q);
    byToken.set(key, list);
  }
  for (const list of byToken.values()) {
    list.sort((a, b) => a.t - b.t);
    let cachedAt = -Infinity;
    let cached = 0;
    for (const q of list) {
      if (q.signal?.kind !== 'stale') continue;
      const tok = q.signal.token;
      if (q.t - cachedAt >= AUTH_CACHE_US) {
        cached = Math.floor(q.t / 1_000_000) - tok.warnAfter / 1000;
        cachedAt = q.t;
      }
      if (cached <= 0) throw new Error(`request ${q.auditID} is not past warnafter`);
      q.authn = { ...q.authn, [ANN.stale]: staleAnnotation(q.user.username ?? '', cached) };
    }
  }
}
