/**
 * The sandbox's audit traffic: the bundled example audit logs replayed with their timestamps shifted so that the
 * examples' reference time is "now", then live traffic generated from them as sandbox time passes.
 *
 * Live traffic follows the facts of docs/design/domain.md §1 and §6:
 * - every token the examples show being used stale (a **credential template**: subject, pod, `warnafter`) keeps
 *   being used while its pod exists with the same uid, with `seconds after warning threshold` = event time −
 *   `warnafter` (so it grows with sandbox time). Past the EKS limit (7,776,000 s after `warnafter`) the request is
 *   rejected: a 401 audit event with an empty `user` (kubernetes `authn_audit.go`), as in the examples;
 * - a pod that replaced a template's pod (rollout restart) got a fresh projected token, so its use is not annotated
 *   (and not written: the file source only keeps lines with token annotations or 401s) …
 * - … except for a ServiceAccount whose known cause is `static-token-file` (the cause catalog, e.g. Multus thin
 *   plugin): its entrypoint copies the token issued at pod start into a host file once, so that copy turns stale
 *   3607 s after issue (`warnafter`, kubernetes `pkg/serviceaccount/claims.go`) and stays in use: a **recurrence**
 *   one sandbox hour after a restart. A pod whose image is a Multus *thick* image does not do this;
 * - a legacy Secret token keeps being used (its Secret does not depend on pods);
 * - a ServiceAccount recreated after a token was issued invalidates that token: its uses become 401s.
 *
 * All times are epoch milliseconds, UTC. {@link LiveTraffic.tick} is deterministic given its `random` and `newId`.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import { randomUUID } from 'node:crypto';
import { appendFile, mkdir } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { createReadStats, tokenUseFromJson } from '../sources/reader.js';
import { ANNOTATION, USER_EXTRA, type AuditEvent } from '../audit/types.js';
import { EKS_MAX_SECONDS_AFTER_WARNING, WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS } from '../findings/token-math.js';
import type { TokenRecord } from '../findings/types.js';

/** Seconds from a bound token's issue to its `warnafter` (the findings stage's constant, with its source). */
export const ISSUE_TO_WARN_AFTER_SECONDS = WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS;
export { EKS_MAX_SECONDS_AFTER_WARNING };

/** Bounds of the interval between two live uses of one credential, sandbox ms. */
export const MIN_INTERVAL_MS = 10 * 60_000;
export const MAX_INTERVAL_MS = 30 * 60_000;

const RFC3339 = /(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?Z/g;

/** `2026-11-20T12:00:00Z` + seconds, keeping the fraction digits as written. */
function shiftOne(whole: string, frac: string | undefined, deltaSec: number): string {
  const ms = Date.parse(`${whole}Z`);
  if (Number.isNaN(ms)) return `${whole}${frac ?? ''}Z`;
  return `${new Date(ms + deltaSec * 1000).toISOString().slice(0, 19)}${frac ?? ''}Z`;
}

/**
 * Shifts every RFC 3339 UTC timestamp (`YYYY-MM-DDTHH:MM:SS[.frac]Z`) in a text by `deltaSec` whole seconds,
 * keeping each fraction as written (audit events carry microseconds). Works on lines that are not valid JSON too
 * (the examples include a truncated event). Other text is unchanged.
 */
export function shiftTimestampsInText(text: string, deltaSec: number): string {
  if (!Number.isInteger(deltaSec)) throw new RangeError('deltaSec must be whole seconds');
  return text.replace(RFC3339, (_m, whole: string, frac: string | undefined) => shiftOne(whole, frac, deltaSec));
}

/**
 * A deep copy of a JSON value with every string that is exactly an RFC 3339 UTC timestamp shifted by `deltaSec`, and
 * the `kubernetes.io/legacy-token-last-used` label (a `YYYY-MM-DD` date) moved to the shifted date. For the cluster
 * snapshot, so pod start times keep their distance to the tokens in the shifted audit log.
 */
export function shiftTimestampsDeep<T>(value: T, deltaSec: number): T {
  const walk = (v: unknown, key?: string): unknown => {
    if (typeof v === 'string') {
      if (key === 'kubernetes.io/legacy-token-last-used' && /^\d{4}-\d{2}-\d{2}$/.test(v)) {
        return new Date(Date.parse(`${v}T12:00:00Z`) + deltaSec * 1000).toISOString().slice(0, 10);
      }
      const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d+)?Z$/.exec(v);
      return m ? shiftOne(m[1]!, m[2], deltaSec) : v;
    }
    if (Array.isArray(v)) return v.map((x) => walk(x));
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[k] = walk(x, k);
      return out;
    }
    return v;
  };
  return walk(value) as T;
}

/** The bundled examples the sandbox starts from. */
export interface Bundle {
  /** The examples' reference time (`expected.json` `referenceTime`), epoch ms. */
  referenceTime: number;
  /** Audit log lines, oldest file first (the rotated `.gz`, then the current log), unshifted. */
  lines: string[];
  /** Items of `cluster-snapshot.json` (a `v1 List`), unshifted. */
  snapshotItems: Record<string, unknown>[];
}

/**
 * Reads the bundled examples: `expected.json` (reference time), `audit/*.log*` (gzip-compressed backups first, by
 * name, then the current log) and `cluster-snapshot.json`.
 * @throws Error naming the file when one is missing or unreadable.
 */
export function loadBundle(examplesDir: string): Bundle {
  const read = (rel: string): Buffer => {
    try {
      return readFileSync(join(examplesDir, rel));
    } catch (err) {
      throw new TokenwatchError(ErrorCode.SandboxFailed, `sandbox: cannot read bundled example ${join(examplesDir, rel)}: ${(err as Error).message}`, { cause: err });
    }
  };
  const expected = JSON.parse(read('expected.json').toString('utf8')) as { referenceTime?: string };
  const referenceTime = Date.parse(expected.referenceTime ?? '');
  if (Number.isNaN(referenceTime)) throw new TokenwatchError(ErrorCode.SandboxFailed, 'sandbox: examples/expected.json has no referenceTime');
  const rotated = read('audit/kube-apiserver-audit-2026-11-19T06-00-00.000.log.gz');
  const current = read('audit/kube-apiserver-audit.log');
  const lines = [...gunzipSync(rotated).toString('utf8').split('\n'), ...current.toString('utf8').split('\n')].filter((l) => l.length > 0);
  const snapshot = JSON.parse(read('cluster-snapshot.json').toString('utf8')) as { items?: Record<string, unknown>[] };
  return { referenceTime, lines, snapshotItems: snapshot.items ?? [] };
}

/** A token the examples show in use, learnt from its latest audit event. */
export interface CredentialTemplate
  extends Pick<TokenRecord, 'subject' | 'namespace' | 'serviceAccount' | 'pod' | 'podUid' | 'node' | 'warnAfter' | 'lastSeen' | 'requests'> {
  /** `stale:<subject>:<pod uid or name>:<warnAfter minute>` or `legacy:<subject>`. */
  key: string;
  kind: 'stale' | 'legacy';
  /** Stale tokens: `warnafter`, epoch ms (in the time of the lines it was learnt from). */
  warnAfter?: number;
  /** The ServiceAccount uid the token was issued for (`user.uid`), when the event has it. */
  serviceAccountUid?: string;
  /** Interval between live uses, sandbox ms, within [{@link MIN_INTERVAL_MS}, {@link MAX_INTERVAL_MS}]. */
  intervalMs: number;
  /** The latest event, parsed (the shape live events copy). */
  event: AuditEvent;
}

/**
 * Learns the credential templates of audit lines: one per stale token (subject, pod, `warnafter` to the minute)
 * and one per legacy-token subject, from the events with the latest time. Lines that are not token uses (or not
 * JSON) are ignored. The interval between live uses is the mean gap of the seen uses, clamped to
 * [{@link MIN_INTERVAL_MS}, {@link MAX_INTERVAL_MS}].
 */
export function learnTemplates(lines: readonly string[]): CredentialTemplate[] {
  const stats = createReadStats();
  const groups = new Map<string, { first: number; last: number; ids: Set<string>; event: AuditEvent; tpl: Omit<CredentialTemplate, 'lastSeen' | 'requests' | 'intervalMs' | 'event'> }>();
  for (const line of lines) {
    if (!line.includes(ANNOTATION.staleToken) && !line.includes(ANNOTATION.legacyToken)) continue;
    const use = tokenUseFromJson(line, stats);
    if (!use?.subject || !use.namespace || !use.serviceAccount) continue;
    if (use.kind !== 'stale' && use.kind !== 'legacy') continue;
    const key =
      use.kind === 'stale'
        ? `stale:${use.subject}:${use.podUid ?? use.pod ?? '-'}:${Math.round((use.warnAfter ?? 0) / 60_000)}`
        : `legacy:${use.subject}`;
    let g = groups.get(key);
    const event = JSON.parse(line) as AuditEvent;
    if (!g) {
      g = {
        first: use.time,
        last: use.time,
        ids: new Set(),
        event,
        tpl: {
          key,
          kind: use.kind,
          subject: use.subject,
          namespace: use.namespace,
          serviceAccount: use.serviceAccount,
          ...(use.pod ? { pod: use.pod } : {}),
          ...(use.podUid ? { podUid: use.podUid } : {}),
          ...(use.node ? { node: use.node } : {}),
          ...(use.warnAfter !== undefined ? { warnAfter: use.warnAfter } : {}),
          ...(event.user?.uid ? { serviceAccountUid: event.user.uid } : {}),
        },
      };
      groups.set(key, g);
    }
    g.ids.add(use.auditID);
    g.first = Math.min(g.first, use.time);
    // Prefer the latest ResponseComplete event as the template (it has the response status).
    if (use.time > g.last || (use.time === g.last && event.stage === 'ResponseComplete')) {
      g.last = use.time;
      g.event = event;
    }
  }
  return [...groups.values()]
    .map((g) => {
      const n = g.ids.size;
      const mean = n > 1 ? (g.last - g.first) / (n - 1) : MAX_INTERVAL_MS;
      return { ...g.tpl, lastSeen: g.last, requests: n, intervalMs: Math.round(Math.min(MAX_INTERVAL_MS, Math.max(MIN_INTERVAL_MS, mean))), event: g.event };
    })
    .sort((a, b) => a.key.localeCompare(b.key));
}

/** A pod as the live traffic needs it. */
export interface PodView {
  namespace: string;
  name: string;
  uid: string;
  serviceAccount: string;
  node?: string;
  /** The node's IP (`status.hostIP`). */
  hostIP?: string;
  /** When the pod started (`status.startTime`, else its creation), epoch ms. Its projected token is issued then. */
  startedAt: number;
  images: string[];
}

/** What the live traffic reads of the (simulated) cluster, at the time of each tick. */
export interface ClusterView {
  pods(): PodView[];
  /** The ServiceAccount's uid and creation time (epoch ms), or undefined when it does not exist. */
  serviceAccount(namespace: string, name: string): { uid: string; createdAt: number } | undefined;
}

/** Options of {@link LiveTraffic}. */
export interface LiveTrafficOptions {
  /** Templates learnt from the **shifted** bundle (times in sandbox time). */
  templates: CredentialTemplate[];
  cluster: ClusterView;
  /** ServiceAccounts (`namespace/name`) whose pods copy their token into a file once (cause `static-token-file`). */
  staticTokenSubjects: ReadonlySet<string>;
  /** Seconds after `warnafter` from which the API server rejects a token. Default {@link EKS_MAX_SECONDS_AFTER_WARNING}. */
  maxSecondsAfterWarning?: number;
  /** Uniform [0, 1) source (default `Math.random`); inject for deterministic tests. */
  random?: () => number;
  /** auditID source (default `randomUUID`). */
  newId?: () => string;
}

interface Schedule {
  nextAt: number;
  intervalMs: number;
}

/** One live use, before it is written. */
export interface LiveUse {
  kind: 'stale' | 'legacy' | 'unauthorized';
  /** Credential key (template key, or `pod:<uid>` for a token copied by a static-token-file pod). */
  credential: string;
  subject: string;
  pod?: string;
  at: number;
  secondsAfterWarning?: number;
}

/**
 * Generates live audit events for the credentials of {@link LiveTrafficOptions.templates} and of static-token-file
 * pods, as sandbox time passes. See the module docstring for the rules.
 */
export class LiveTraffic {
  private readonly schedules = new Map<string, Schedule>();
  private readonly random: () => number;
  private readonly newId: () => string;
  private readonly maxSec: number;

  constructor(private readonly opts: LiveTrafficOptions) {
    this.random = opts.random ?? Math.random;
    this.newId = opts.newId ?? randomUUID;
    this.maxSec = opts.maxSecondsAfterWarning ?? EKS_MAX_SECONDS_AFTER_WARNING;
  }

  /**
   * The audit event lines (RequestReceived + ResponseComplete, or ResponseStarted for a 401) of every use due in
   * (previous tick, `now`], in time order, with the uses they stand for.
   */
  tick(now: number): { lines: string[]; uses: LiveUse[] } {
    const pods = this.opts.cluster.pods();
    const podsByUid = new Map(pods.map((p) => [p.uid, p]));
    const covered = new Set<string>();
    const due: Array<{ at: number; line: () => string[]; use: LiveUse }> = [];

    for (const t of this.opts.templates) {
      if (t.kind === 'stale') {
        const pod = t.podUid ? podsByUid.get(t.podUid) : pods.find((p) => p.namespace === t.namespace && p.name === t.pod);
        if (!pod) continue; // the pod is gone: its token is invalidated and nobody holds it any more
        covered.add(pod.uid);
        const valid = this.tokenValid(t.namespace, t.serviceAccount, t.serviceAccountUid, t.warnAfter! - ISSUE_TO_WARN_AFTER_SECONDS * 1000);
        for (const at of this.dueTimes(t.key, now, t.intervalMs)) {
          const sec = secondsAfter(at, t.warnAfter!);
          const rejected = !valid || sec > this.maxSec;
          due.push({
            at,
            use: { kind: rejected ? 'unauthorized' : 'stale', credential: t.key, subject: t.subject, ...(t.pod ? { pod: t.pod } : {}), at, ...(rejected ? {} : { secondsAfterWarning: sec }) },
            line: () => (rejected ? this.unauthorizedLines(t.event, at) : this.staleLines(t.event, at, sec, undefined)),
          });
        }
      } else {
        const valid = this.tokenValid(t.namespace, t.serviceAccount, t.serviceAccountUid, Number.NEGATIVE_INFINITY);
        for (const at of this.dueTimes(t.key, now, t.intervalMs)) {
          due.push({
            at,
            use: { kind: valid ? 'legacy' : 'unauthorized', credential: t.key, subject: t.subject, at },
            line: () => (valid ? this.legacyLines(t.event, at) : this.unauthorizedLines(t.event, at)),
          });
        }
      }
    }

    // Static-token-file pods not covered by a template: the token issued at pod start, copied once.
    for (const pod of pods) {
      if (covered.has(pod.uid)) continue;
      const subjectKey = `${pod.namespace}/${pod.serviceAccount}`;
      if (!this.opts.staticTokenSubjects.has(subjectKey)) continue;
      if (pod.images.some((i) => i.includes('thick'))) continue;
      const sameSa = this.opts.templates.filter((t) => t.kind === 'stale' && t.namespace === pod.namespace && t.serviceAccount === pod.serviceAccount);
      const tpl = sameSa.find((t) => t.node !== undefined && t.node === pod.node) ?? sameSa[0];
      if (!tpl) continue;
      const issuedAt = pod.startedAt + 1000;
      const warnAfter = issuedAt + ISSUE_TO_WARN_AFTER_SECONDS * 1000;
      const key = `pod:${pod.uid}`;
      const sa = this.opts.cluster.serviceAccount(pod.namespace, pod.serviceAccount);
      const valid = sa !== undefined && sa.createdAt <= issuedAt;
      // Fresh until warnafter: nothing to write; the first stale use comes soon after it.
      const first = () => warnAfter + Math.floor(this.random() * (tpl.intervalMs / 4));
      for (const at of this.dueTimes(key, now, tpl.intervalMs, first)) {
        const sec = secondsAfter(at, warnAfter);
        const rejected = !valid || sec > this.maxSec;
        const subst = { pod, credentialId: `JTI=${uuidFrom(pod.uid)}` };
        due.push({
          at,
          use: { kind: rejected ? 'unauthorized' : 'stale', credential: key, subject: tpl.subject, pod: pod.name, at, ...(rejected ? {} : { secondsAfterWarning: sec }) },
          line: () => (rejected ? this.unauthorizedLines(tpl.event, at, pod.hostIP) : this.staleLines(tpl.event, at, sec, subst)),
        });
      }
    }
    due.sort((a, b) => a.at - b.at);
    return { lines: due.flatMap((d) => d.line()), uses: due.map((d) => d.use) };
  }

  /** Whether a token issued at `issuedAt` for ServiceAccount uid `uid` is still valid (the SA was not recreated). */
  private tokenValid(namespace: string, name: string, uid: string | undefined, issuedAt: number): boolean {
    const sa = this.opts.cluster.serviceAccount(namespace, name);
    if (!sa) return false;
    if (uid !== undefined) return sa.uid === uid;
    return sa.createdAt <= issuedAt;
  }

  /**
   * Use times of credential `key` up to `now`. A credential seen for the first time is first used at `firstAt()`
   * (default: within one interval from now).
   */
  private dueTimes(key: string, now: number, intervalMs: number, firstAt?: () => number): number[] {
    let s = this.schedules.get(key);
    if (!s) {
      s = { nextAt: firstAt ? firstAt() : now + Math.floor(this.random() * intervalMs), intervalMs };
      this.schedules.set(key, s);
    }
    // After a pause (sandbox stopped, machine asleep) do not write a backlog: resume from now.
    if (s.nextAt < now - 2 * intervalMs) s.nextAt = now - Math.floor(this.random() * intervalMs);
    const out: number[] = [];
    while (s.nextAt <= now && out.length < 10) {
      out.push(s.nextAt);
      s.nextAt += Math.max(1000, Math.round(intervalMs * (0.75 + 0.5 * this.random())));
    }
    return out;
  }

  private stamp(at: number): string {
    const micros = String(Math.floor(this.random() * 1000)).padStart(3, '0');
    return `${new Date(at).toISOString().slice(0, 23)}${micros}Z`;
  }

  /** RequestReceived + ResponseComplete events of a stale use, from `tpl`, optionally as another pod's copy. */
  private staleLines(tpl: AuditEvent, at: number, seconds: number, subst: { pod: PodView; credentialId: string } | undefined): string[] {
    const ev = structuredClone(tpl);
    ev.auditID = this.newId();
    const subject = ev.user?.username ?? '';
    ev.annotations = { ...(ev.annotations ?? {}), [ANNOTATION.staleToken]: `subject: ${subject}, seconds after warning threshold: ${seconds}` };
    if (subst && ev.user) {
      const extra = { ...(ev.user.extra ?? {}) };
      extra[USER_EXTRA.podName] = [subst.pod.name];
      extra[USER_EXTRA.podUid] = [subst.pod.uid];
      extra[USER_EXTRA.credentialId] = [subst.credentialId];
      if (subst.pod.node) extra[USER_EXTRA.nodeName] = [subst.pod.node];
      ev.user = { ...ev.user, extra };
      if (subst.pod.hostIP) ev.sourceIPs = [subst.pod.hostIP];
    }
    return this.twoStages(ev, at);
  }

  private legacyLines(tpl: AuditEvent, at: number): string[] {
    const ev = structuredClone(tpl);
    ev.auditID = this.newId();
    return this.twoStages(ev, at);
  }

  private twoStages(ev: AuditEvent, at: number): string[] {
    const received = this.stamp(at);
    const done = this.stamp(at + 3 + Math.floor(this.random() * 20));
    const authz = Object.fromEntries(Object.entries(ev.annotations ?? {}).filter(([k]) => !k.startsWith('authorization.k8s.io/')));
    const first: AuditEvent = { ...ev, stage: 'RequestReceived', requestReceivedTimestamp: received, stageTimestamp: received, annotations: authz };
    delete first.responseStatus;
    const last: AuditEvent = { ...ev, stage: 'ResponseComplete', requestReceivedTimestamp: received, stageTimestamp: done };
    if (!last.responseStatus) last.responseStatus = { code: 200 };
    return [JSON.stringify(first), JSON.stringify(last)];
  }

  /**
   * The event of a rejected request (kubernetes `staging/src/k8s.io/apiserver/pkg/endpoints/filters/authn_audit.go`):
   * empty `user`, stage ResponseStarted, `responseStatus {metadata:{}, message, code: 401}`, no annotations.
   */
  private unauthorizedLines(tpl: AuditEvent, at: number, sourceIP?: string): string[] {
    const received = this.stamp(at);
    const ev: Record<string, unknown> = {
      kind: 'Event',
      apiVersion: 'audit.k8s.io/v1',
      level: tpl.level ?? 'Metadata',
      auditID: this.newId(),
      stage: 'ResponseStarted',
      requestURI: tpl.requestURI,
      verb: tpl.verb,
      user: {},
      sourceIPs: sourceIP ? [sourceIP] : tpl.sourceIPs,
      userAgent: tpl.userAgent,
      ...(tpl.objectRef ? { objectRef: tpl.objectRef } : {}),
      responseStatus: { metadata: {}, message: 'Authentication failed, attempted: bearer', code: 401 },
      requestReceivedTimestamp: received,
      stageTimestamp: this.stamp(at + 1),
    };
    return [JSON.stringify(ev)];
  }
}

/**
 * `seconds after warning threshold` of a request at `at` for a token with `warnAfter` (both epoch ms), as the API
 * server computes it: `nowTime.Unix() - warnafter.Unix()` (kubernetes `pkg/serviceaccount/claims.go`).
 */
export function secondsAfter(at: number, warnAfter: number): number {
  return Math.floor(at / 1000) - Math.floor(warnAfter / 1000);
}

/** A stable UUID-shaped string derived from another id (for credential ids of synthesized tokens). */
function uuidFrom(id: string): string {
  let h = 0x811c9dc5;
  let out = '';
  for (let round = 0; out.length < 32; round++) {
    for (const ch of `${id}:${round}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
    out += h.toString(16).padStart(8, '0');
  }
  return `${out.slice(0, 8)}-${out.slice(8, 12)}-4${out.slice(13, 16)}-a${out.slice(17, 20)}-${out.slice(20, 32)}`;
}

/** Appends lines to an audit log file, one write at a time (in call order), creating its directory. */
export class AuditLogWriter {
  private queue: Promise<void> = Promise.resolve();

  constructor(readonly path: string) {}

  /** Appends `lines` (each followed by `\n`). Resolves when written; rejects with the file system error. */
  append(lines: readonly string[]): Promise<void> {
    if (lines.length === 0) return this.queue;
    const text = `${lines.join('\n')}\n`;
    const next = this.queue.then(async () => {
      await mkdir(dirname(this.path), { recursive: true });
      await appendFile(this.path, text, 'utf8');
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Resolves when every append so far has finished. */
  flush(): Promise<void> {
    return this.queue;
  }
}
