/**
 * The fake Kubernetes API server's vocabulary (`src/sandbox/fakes/kubernetes.ts`): objects, the resource types it
 * serves, recorded requests and the matches, faults and RBAC rules tests set on them, store events, and `Status` errors.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ErrorCode, TokenwatchError } from '../../../errors.js';

/** A Kubernetes object as JSON. */
export type KubeObject = Record<string, unknown> & {
  apiVersion?: string;
  kind?: string;
  metadata?: Record<string, unknown>;
};

/** API verbs as RBAC names them. */
export type KubeVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';

/** A served resource type. Add your own with the `resources` option of `startFakeKube` (`src/sandbox/fakes/kubernetes.ts`). */
export interface ResourceDef {
  /** API group, `''` for core. */
  group: string;
  version: string;
  /** Plural lower-case name (`daemonsets`). */
  resource: string;
  kind: string;
  namespaced: boolean;
  /** Whether `status` is a subresource (main-resource writes keep status; `/status` writes change only status). */
  statusSubresource?: boolean;
  /** Field selector keys supported besides `metadata.name` and `metadata.namespace`. */
  fieldSelectors?: string[];
}

/** The resource types served by default (core/v1, apps/v1, batch/v1, coordination.k8s.io/v1, events.k8s.io/v1). */
export const DEFAULT_RESOURCES: readonly ResourceDef[] = [
  {
    group: '',
    version: 'v1',
    resource: 'pods',
    kind: 'Pod',
    namespaced: true,
    statusSubresource: true,
    // kubernetes pkg/registry/core/pod/strategy.go PodToSelectableFields / apis/core/v1/conversion.go
    fieldSelectors: [
      'spec.nodeName',
      'spec.restartPolicy',
      'spec.schedulerName',
      'spec.serviceAccountName',
      'spec.hostNetwork',
      'status.phase',
      'status.podIP',
      'status.nominatedNodeName',
    ],
  },
  { group: '', version: 'v1', resource: 'serviceaccounts', kind: 'ServiceAccount', namespaced: true },
  // kubernetes pkg/registry/core/secret/strategy.go SelectableFields: type
  { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true, fieldSelectors: ['type'] },
  { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true },
  {
    group: '',
    version: 'v1',
    resource: 'events',
    kind: 'Event',
    namespaced: true,
    fieldSelectors: [
      'involvedObject.kind',
      'involvedObject.namespace',
      'involvedObject.name',
      'involvedObject.uid',
      'involvedObject.apiVersion',
      'involvedObject.resourceVersion',
      'involvedObject.fieldPath',
      'reason',
      'reportingComponent',
      'source',
      'type',
    ],
  },
  { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false, statusSubresource: true, fieldSelectors: ['status.phase'] },
  { group: '', version: 'v1', resource: 'nodes', kind: 'Node', namespaced: false, statusSubresource: true, fieldSelectors: ['spec.unschedulable'] },
  { group: 'apps', version: 'v1', resource: 'daemonsets', kind: 'DaemonSet', namespaced: true, statusSubresource: true },
  { group: 'apps', version: 'v1', resource: 'deployments', kind: 'Deployment', namespaced: true, statusSubresource: true },
  { group: 'apps', version: 'v1', resource: 'statefulsets', kind: 'StatefulSet', namespaced: true, statusSubresource: true },
  { group: 'apps', version: 'v1', resource: 'replicasets', kind: 'ReplicaSet', namespaced: true, statusSubresource: true, fieldSelectors: ['status.replicas'] },
  { group: 'apps', version: 'v1', resource: 'controllerrevisions', kind: 'ControllerRevision', namespaced: true },
  { group: 'batch', version: 'v1', resource: 'jobs', kind: 'Job', namespaced: true, statusSubresource: true, fieldSelectors: ['status.successful'] },
  { group: 'batch', version: 'v1', resource: 'cronjobs', kind: 'CronJob', namespaced: true, statusSubresource: true },
  { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease', namespaced: true },
  { group: 'events.k8s.io', version: 'v1', resource: 'events', kind: 'Event', namespaced: true },
];

/** One request as the fake received it. */
export interface RecordedRequest {
  method: string;
  /** URL path without query. */
  path: string;
  /** Query parameters (last value wins). */
  query: Record<string, string>;
  /** `content-type` header, if any. */
  contentType?: string;
  /** `accept` header, if any. */
  accept?: string;
  headers: IncomingHttpHeaders;
  /**
   * `gzip` when the answer was sent gzip-compressed: as kube-apiserver, the fake compresses answers over 128 KiB to a
   * client whose `Accept-Encoding` names gzip (never watch streams).
   */
  responseEncoding?: 'gzip';
  /** Body parsed as JSON when it is JSON, else the raw text; undefined when empty. */
  body?: unknown;
  /** RBAC verb, when the path names a resource. */
  verb?: KubeVerb;
  group?: string;
  version?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  /** Whether `?dryRun=All` was given. */
  dryRun: boolean;
}

/** Which requests a fault, delay or rule applies to: fields that must all equal (path may be a RegExp), or a predicate. */
export type RequestMatch =
  | {
      method?: string;
      verb?: KubeVerb;
      group?: string;
      resource?: string;
      subresource?: string;
      namespace?: string;
      name?: string;
      path?: string | RegExp;
    }
  | ((req: RecordedRequest) => boolean);

/** A fault: an HTTP status (answered as a `Status` object), a full Status spec, or `'disconnect'` (socket destroyed). */
export type Fault = number | { code: number; reason?: string; message?: string; body?: unknown } | 'disconnect';

/** An RBAC PolicyRule subset (rbac.authorization.k8s.io/v1), `'*'` allowed in each list. */
export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  /** Namespaces the rule applies in (a RoleBinding's namespace); omitted = all (ClusterRoleBinding). */
  namespaces?: string[];
  /** Non-resource URLs (e.g. `/metrics`) the rule grants `verbs` on; such a rule usually has empty apiGroups/resources. */
  nonResourceURLs?: string[];
}

/** A change in the store. */
export interface WriteEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  def: ResourceDef;
  object: KubeObject;
  previous?: KubeObject;
}

/** Thrown by `ObjectStore` (`object-store.ts`) methods; the HTTP layer turns it into a `Status` response. */
export class StatusError extends TokenwatchError {
  constructor(
    /** The HTTP status code of the answer. */
    readonly httpStatus: number,
    readonly reason: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(ErrorCode.FakeRequestInvalid, message);
    this.name = 'StatusError';
  }
  /** The `Status` object for this error. */
  toStatus(): KubeObject {
    return statusObject(this.httpStatus, this.message, this.reason, this.details);
  }
}

/** Default `reason` for an HTTP code (apimachinery `pkg/apis/meta/v1/types.go` StatusReason values). */
export function reasonFor(code: number): string {
  const reasons: Record<number, string> = {
    400: 'BadRequest',
    401: 'Unauthorized',
    403: 'Forbidden',
    404: 'NotFound',
    405: 'MethodNotAllowed',
    406: 'NotAcceptable',
    409: 'Conflict',
    410: 'Expired',
    413: 'RequestEntityTooLarge',
    415: 'UnsupportedMediaType',
    422: 'Invalid',
    429: 'TooManyRequests',
    500: 'InternalError',
    503: 'ServiceUnavailable',
    504: 'Timeout',
  };
  return reasons[code] ?? (code >= 500 ? 'InternalError' : 'Unknown');
}

/** A failure `Status` object as the API server sends it. */
export function statusObject(code: number, message: string, reason = reasonFor(code), details?: Record<string, unknown>): KubeObject {
  const s: KubeObject = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
  if (details) s['details'] = details;
  return s;
}
