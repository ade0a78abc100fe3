/**
 * Renders requests to audit.k8s.io/v1 Event JSON lines exactly as the API server's log backend writes them:
 * compact Go JSON, struct field order, map keys sorted, `<>&` escaped, RFC 3339 microsecond timestamps.
 * One event per stage: RequestReceived + ResponseComplete (+ ResponseStarted for watches); a request rejected
 * by authentication logs a single ResponseStarted event with an empty `user`
 * (kubernetes `staging/src/k8s.io/apiserver/pkg/endpoints/filters/authn_audit.go`).
 */
import { goJson, microTime } from './format.js';
import { ANN, type Req } from './traffic.js';

/** One rendered audit event. */
export interface RenderedEvent {
  req: Req;
  stage: 'RequestReceived' | 'ResponseStarted' | 'ResponseComplete';
  /** `stageTimestamp`, epoch µs (the order the backend writes events in). */
  stageUs: number;
  /** The JSON line, without newline. */
  line: string;
}

const STAGE_ORDER = { RequestReceived: 0, ResponseStarted: 1, ResponseComplete: 2 } as const;

function sortedAnnotations(a: Record<string, string>): Record<string, string> | undefined {
  const keys = Object.keys(a).sort();
  return keys.length === 0 ? undefined : Object.fromEntries(keys.map((k) => [k, a[k] as string]));
}

function eventObject(q: Req, stage: RenderedEvent['stage'], stageUs: number): Record<string, unknown> {
  const e: Record<string, unknown> = {
    kind: 'Event',
    apiVersion: 'audit.k8s.io/v1',
    level: 'Metadata',
    auditID: q.auditID,
    stage,
    requestURI: q.uri,
    verb: q.verb,
    user: q.user,
    sourceIPs: [q.sourceIP],
    userAgent: q.userAgent,
  };
  if (q.objectRef) e['objectRef'] = q.objectRef;
  if (stage !== 'RequestReceived') {
    if (q.mode === 'failed-authn') {
      // WithFailedAuthenticationAudit sets Status{Message: getAuthMethods(req)}; the response writer adds the code.
      e['responseStatus'] = { metadata: {}, message: 'Authentication failed, attempted: bearer', code: q.code };
    } else if (q.failure) {
      const s: Record<string, unknown> = { metadata: {}, status: 'Failure', message: q.failure.message, reason: q.failure.reason };
      if (q.failure.details) s['details'] = q.failure.details;
      s['code'] = q.code;
      e['responseStatus'] = s;
    } else {
      e['responseStatus'] = { metadata: {}, code: q.code };
    }
  }
  e['requestReceivedTimestamp'] = microTime(q.t);
  e['stageTimestamp'] = microTime(stageUs);
  let ann: Record<string, string> = { ...q.authn };
  if (stage !== 'RequestReceived' && q.authz) ann = { ...ann, [ANN.decision]: q.authz.decision, [ANN.reason]: q.authz.reason, ...q.handlerAnnotations };
  const sorted = sortedAnnotations(ann);
  if (sorted) e['annotations'] = sorted;
  return e;
}

/**
 * All events of `reqs` whose `stageTimestamp` is not after `cutUs` (later stages were not yet written when the
 * log was copied), in write order.
 */
export function renderEvents(reqs: readonly Req[], cutUs: number): RenderedEvent[] {
  const out: RenderedEvent[] = [];
  for (const q of reqs) {
    const stages: Array<[RenderedEvent['stage'], number]> = [];
    if (q.mode === 'failed-authn') stages.push(['ResponseStarted', q.t + q.latencyUs]);
    else if (q.mode === 'in-flight') stages.push(['RequestReceived', q.t]);
    else {
      stages.push(['RequestReceived', q.t]);
      if (q.watchUs !== undefined) {
        stages.push(['ResponseStarted', q.t + q.latencyUs]);
        stages.push(['ResponseComplete', q.t + q.watchUs]);
      } else stages.push(['ResponseComplete', q.t + q.latencyUs]);
    }
    for (const [stage, stageUs] of stages) {
      if (stageUs > cutUs) continue;
      out.push({ req: q, stage, stageUs, line: goJson(eventObject(q, stage, stageUs)) });
    }
  }
  out.sort((a, b) => a.stageUs - b.stageUs || STAGE_ORDER[a.stage] - STAGE_ORDER[b.stage] || (a.req.auditID < b.req.auditID ? -1 : 1));
  return out;
}
