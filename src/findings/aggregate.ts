/**
 * Aggregation of token uses (one per audit event, see `src/audit/types.ts`) into token records
 * (`TokenRecord`, one per token), the unit the findings are built from and the live store persists.
 *
 * Grouping (docs/design/architecture.md "Terms": token):
 * - **stale** uses: by (subject, pod uid — else pod name), joined to an existing token of that pod
 *   when their `warnAfter` lies within ±{@link WARN_AFTER_TOLERANCE_MS} of it. The API server caches
 *   authentication results together with their audit annotations (kubernetes
 *   `staging/src/k8s.io/apiserver/pkg/authentication/token/cache/cached_token_authenticator.go`),
 *   so events of one token compute `warnAfter`s a few seconds apart. A `warnAfter` further away for
 *   the same pod is a new token. A token's `warnAfter` is the earliest seen (cached results only make
 *   the computed value later), so the result does not depend on the order uses arrive in. It is in
 *   whole seconds, like the `warnafter` claim (see `warnAfterTime` in `./token-math.ts`).
 * - **legacy** uses: by (subject, Secret namespace/name named by the legacy-token annotations).
 * - Every use is attributed to one source address: the rightmost `sourceIPs` entry that is not a trusted proxy
 *   (`clientAddress`, `src/core/source-address.ts`; default: the connection's own address, the last entry). The
 *   entries left of it are client-settable (`X-Forwarded-For`, `X-Real-Ip`): kept in `forwardedIPs` only to be shown.
 * - **unauthorized** uses (401, no subject): by (source address, user agent). They are attributed to a
 *   subject in {@link TokenAggregator.records}, after all uses are in (files arrive in any order):
 *   to the one subject whose *stale* uses came from the same source IP with the same user agent
 *   (docs/design/domain.md §2: 401 events carry no user, `authn_audit.go`). The attribution says it is inferred.
 *   401s that match no subject, or several, go to the subject {@link UNATTRIBUTED}
 *   (namespace and ServiceAccount `(unattributed)` too), with an attribution saying why.
 *
 * Incremental use (live store): `TokenAggregator.from(opts, records)` reloads persisted records;
 * new uses then merge into them exactly as if they had been added in one run.
 */
import { clientAddress, NO_TRUSTED_PROXIES, type TrustedProxies } from '../core/source-address.js';
import type { TokenUse } from '../audit/types.js';
import { DistinctCounter } from './distinct.js';
import { rejectionTime, warnAfterTime } from './token-math.js';
import type { TokenKind, TokenRecord } from './types.js';
import type { MaxTokenAge } from '../config/max-token-age.js';
import { HOUR_MS, MINUTE_MS } from '../core/units.js';

/** Uses whose `warnAfter` is within this many ms of a token's belong to that token. */
export const WARN_AFTER_TOLERANCE_MS = MINUTE_MS;
/** At most this many distinct user agents and source IPs are kept per record. */
export const MAX_DISTINCT_VALUES = 20;
/**
 * Subject, namespace and ServiceAccount given to 401 records that cannot be attributed to one
 * ServiceAccount. Chosen so that it reads clearly in tables and Slack (`(unattributed)/(unattributed)`)
 * and can never be a real name (Kubernetes names cannot contain parentheses).
 */
export const UNATTRIBUTED = '(unattributed)';
/** Attribution of a 401 whose audit event named the subject itself. */
export const DIRECT_ATTRIBUTION = 'subject named in the audit event';
/**
 * At most this many unattributed 401 sources (distinct source IPs + user agent) are kept one by one per cluster: the
 * ones with the most requests, plus any that share a source with stale uses (they may be attributed). The others are
 * folded into one overflow record (`TokenRecord.overflow`) that counts their requests and estimates how many they
 * were, so memory, the live store and the findings stay bounded whatever arrives (anyone who can reach the API server
 * can make audit-logged 401s).
 */
export const MAX_UNATTRIBUTED_SOURCES = 100;
/** Bucket-key prefix of 401 records whose audit events named no subject. */
const UNDIRECTED_401 = 'u\0\0';

/** Subject of a stale or legacy use whose event named neither a user nor a ServiceAccount. */
export const UNKNOWN_SUBJECT = '(unknown subject)';
/** Namespace and ServiceAccount used for a subject that is not `system:serviceaccount:<ns>:<name>`. */
export const NOT_A_SERVICE_ACCOUNT = '(not a ServiceAccount)';

const SA_PREFIX = 'system:serviceaccount:';

/** Options of {@link TokenAggregator}. */
export interface AggregatorOptions {
  /** Cluster name put on every record. */
  cluster: string;
  /** Rejection rule used for `rejectionAt` of stale tokens. */
  maxTokenAge: MaxTokenAge;
  /** Proxies trusted to append the address they saw to `X-Forwarded-For` (default none). */
  trustedProxies?: TrustedProxies;
}

/**
 * Splits `system:serviceaccount:<ns>:<name>` into namespace and name; undefined for other usernames.
 * Source: kubernetes `staging/src/k8s.io/apiserver/pkg/authentication/serviceaccount/util.go`.
 */
export function parseServiceAccountSubject(subject: string): { namespace: string; serviceAccount: string } | undefined {
  if (!subject.startsWith(SA_PREFIX)) return undefined;
  const rest = subject.slice(SA_PREFIX.length);
  const i = rest.indexOf(':');
  if (i <= 0 || i === rest.length - 1) return undefined;
  return { namespace: rest.slice(0, i), serviceAccount: rest.slice(i + 1) };
}

/** Epoch ms of the start of the UTC hour containing `t`, as the `hourly` key. */
export function hourKey(t: number): string {
  return String(Math.floor(t / HOUR_MS) * HOUR_MS);
}

const findingKindOf: Record<TokenUse['kind'], TokenKind> = {
  stale: 'stale-token',
  legacy: 'legacy-token',
  unauthorized: 'unauthorized',
};

/** Accumulates token uses of one cluster into {@link TokenRecord}s. Pure: no I/O, no clock. */
export class TokenAggregator {
  readonly cluster: string;
  readonly maxTokenAge: MaxTokenAge;
  readonly trustedProxies: TrustedProxies;
  /** Uses ignored because their time was not a finite number (counted, never thrown). */
  invalid = 0;
  /** Bucket key → records of that bucket (several tokens per pod for stale uses, else one). */
  private readonly buckets = new Map<string, TokenRecord[]>();
  /** Number of buckets of unattributed 401s (keys starting with {@link UNDIRECTED_401}). */
  private undirected = 0;
  /** 401s folded beyond {@link MAX_UNATTRIBUTED_SOURCES}, and the distinct sources among them. */
  private overflow: { record: TokenRecord; counter: DistinctCounter } | undefined;

  constructor(opts: AggregatorOptions) {
    this.cluster = opts.cluster;
    this.maxTokenAge = opts.maxTokenAge;
    this.trustedProxies = opts.trustedProxies ?? NO_TRUSTED_PROXIES;
  }

  /**
   * An aggregator holding previously built records (e.g. from the live store). Records of another
   * cluster are taken as they are but re-labelled with this cluster; `rejectionAt` is recomputed with
   * this aggregator's rule; records of the same token are merged.
   */
  static from(opts: AggregatorOptions, records: Iterable<TokenRecord>): TokenAggregator {
    const agg = new TokenAggregator(opts);
    for (const r of records) agg.addRecord(r);
    return agg;
  }

  /**
   * Adds one token use; it counts as `use.weight` requests (default 1; a Logs Insights aggregate row
   * stands for several). A use with a non-finite `time` is counted in {@link invalid} and skipped.
   */
  add(use: TokenUse): void {
    if (!Number.isFinite(use.time)) {
      this.invalid++;
      return;
    }
    this.insert(this.recordOfUse(use));
  }

  /** Adds (merges) a record, as {@link from} does. */
  addRecord(record: TokenRecord): void {
    const r = cloneRecord(record);
    r.cluster = this.cluster;
    if (r.overflow) {
      this.foldOverflow(r, new DistinctCounter(r.overflow.sketch));
      return;
    }
    if (r.warnAfter !== undefined) r.rejectionAt = rejectionTime(r.warnAfter, this.maxTokenAge);
    this.insert(r);
  }

  /**
   * All records, with 401s attributed (see the module comment), as fresh copies, in a stable
   * order: kind, subject, pod, warnAfter, first seen.
   */
  records(): TokenRecord[] {
    this.compact(MAX_UNATTRIBUTED_SOURCES);
    const all: TokenRecord[] = [];
    for (const list of this.buckets.values()) for (const r of list) all.push(cloneRecord(r));
    const index = staleSourceIndex(all);
    for (const r of all) if (r.kind === 'unauthorized' && r.attribution !== DIRECT_ATTRIBUTION) attribute(r, index);
    if (this.overflow) {
      const o = cloneRecord(this.overflow.record);
      const sources = this.overflow.counter.estimate();
      o.overflow = { sources, sketch: this.overflow.counter.serialize() };
      o.attribution = `unattributed: about ${sources} more source${sources === 1 ? '' : 's'} (source IP and user agent) with ${o.requests} request${o.requests === 1 ? '' : 's'}, beyond the ${MAX_UNATTRIBUTED_SOURCES} with the most requests; not listed one by one (sample of source IPs: ${o.sourceIPs.slice(0, 5).join(', ') || '(none)'})`;
      all.push(o);
    }
    return all.sort(compareRecords);
  }

  /**
   * Keeps at most `keep` buckets of unattributed 401s: those with the most requests (ties by key), plus those sharing
   * a source IP and user agent with a stale use; folds the rest into the overflow record.
   */
  private compact(keep: number): void {
    if (this.undirected <= keep) return;
    const staleKeys = new Set<string>();
    for (const list of this.buckets.values()) {
      for (const r of list) {
        if (r.kind !== 'stale-token') continue;
        for (const ip of r.sourceIPs) for (const ua of r.userAgents.length > 0 ? r.userAgents : ['']) staleKeys.add(`${ip}\0${ua}`);
      }
    }
    const undirected: [string, TokenRecord][] = [];
    for (const [k, list] of this.buckets) if (k.startsWith(UNDIRECTED_401)) undirected.push([k, list[0]!]);
    undirected.sort(([ka, a], [kb, b]) => b.requests - a.requests || (ka < kb ? -1 : ka > kb ? 1 : 0));
    let kept = 0;
    for (const [k, r] of undirected) {
      const ua = r.userAgents[0] ?? '';
      if (kept < keep || r.sourceIPs.some((ip) => staleKeys.has(`${ip}\0${ua}`))) {
        kept++;
        continue;
      }
      this.buckets.delete(k);
      this.undirected--;
      if (this.overflow) {
        // The same as merging a one-key counter, without allocating a sketch per folded source (401 floods).
        mergeRecord(this.overflow.record, r, this.maxTokenAge);
        this.overflow.counter.add(k);
        continue;
      }
      const counter = new DistinctCounter();
      counter.add(k);
      this.foldOverflow(r, counter);
    }
  }

  private foldOverflow(r: TokenRecord, counter: DistinctCounter): void {
    if (!this.overflow) {
      const record: TokenRecord = {
        ...cloneRecord(r),
        subject: UNATTRIBUTED,
        namespace: UNATTRIBUTED,
        serviceAccount: UNATTRIBUTED,
      };
      delete record.overflow;
      delete record.pod;
      delete record.podUid;
      delete record.node;
      delete record.credentialId;
      this.overflow = { record, counter };
      return;
    }
    mergeRecord(this.overflow.record, r, this.maxTokenAge);
    this.overflow.counter.merge(counter);
  }

  private recordOfUse(use: TokenUse): TokenRecord {
    const kind = findingKindOf[use.kind];
    const { subject, namespace, serviceAccount } = subjectOf(use);
    const weight = use.weight !== undefined && Number.isInteger(use.weight) && use.weight > 0 ? use.weight : 1;
    const source = clientAddress(use.sourceIPs, this.trustedProxies);
    const r: TokenRecord = {
      cluster: this.cluster,
      kind,
      subject,
      namespace,
      serviceAccount,
      requests: weight,
      firstSeen: use.time,
      lastSeen: use.time,
      userAgents: use.userAgent ? [use.userAgent] : [],
      sourceIPs: source.address !== undefined ? [source.address] : [],
      hourly: { [hourKey(use.time)]: weight },
    };
    if (source.forwarded.length > 0) r.forwardedIPs = uniqueBounded(source.forwarded);
    if (use.pod) r.pod = use.pod;
    if (use.podUid) r.podUid = use.podUid;
    if (use.node) r.node = use.node;
    if (use.credentialId) r.credentialId = use.credentialId;
    if (kind === 'stale-token') {
      const warnAfter =
        use.secondsAfterWarning !== undefined && Number.isFinite(use.secondsAfterWarning)
          ? warnAfterTime(use.time, use.secondsAfterWarning)
          : use.warnAfter !== undefined
            ? Math.floor(use.warnAfter / 1000) * 1000
            : undefined;
      if (warnAfter !== undefined && Number.isFinite(warnAfter)) {
        r.warnAfter = warnAfter;
        r.rejectionAt = rejectionTime(warnAfter, this.maxTokenAge);
        r.maxSecondsAfterWarning = use.secondsAfterWarning ?? Math.round((use.time - warnAfter) / 1000);
      }
    }
    if (kind === 'legacy-token' && use.legacySecret) r.legacySecret = { ...use.legacySecret };
    if (kind === 'unauthorized') {
      if (use.subject) r.attribution = DIRECT_ATTRIBUTION;
      else r.attribution = unattributedText(r, []);
    }
    return r;
  }

  private insert(r: TokenRecord): void {
    const key = bucketKey(r);
    const list = this.buckets.get(key);
    if (!list) {
      this.buckets.set(key, [r]);
      if (key.startsWith(UNDIRECTED_401) && ++this.undirected > 2 * MAX_UNATTRIBUTED_SOURCES) {
        this.compact(MAX_UNATTRIBUTED_SOURCES);
      }
      return;
    }
    if (r.kind !== 'stale-token') {
      mergeRecord(list[0]!, r, this.maxTokenAge);
      return;
    }
    let best: TokenRecord | undefined;
    let bestDistance = Infinity;
    for (const t of list) {
      const d = t.warnAfter === undefined || r.warnAfter === undefined
        ? (t.warnAfter === r.warnAfter ? 0 : Infinity)
        : Math.abs(t.warnAfter - r.warnAfter);
      if (d <= WARN_AFTER_TOLERANCE_MS && d < bestDistance) {
        best = t;
        bestDistance = d;
      }
    }
    if (best) mergeRecord(best, r, this.maxTokenAge);
    else list.push(r);
  }
}

/**
 * Merges `source` into `target` (same token): sums requests and hourly counts, widens first/last
 * seen, keeps the earliest `warnAfter` (recomputing `rejectionAt`), the largest
 * `maxSecondsAfterWarning`, bounded unions of user agents and source IPs, and the first known pod,
 * node and credential id. A legacy Secret seen as `invalidated` stays so.
 */
export function mergeRecord(target: TokenRecord, source: TokenRecord, maxTokenAge: MaxTokenAge): void {
  target.requests += source.requests;
  target.firstSeen = Math.min(target.firstSeen, source.firstSeen);
  target.lastSeen = Math.max(target.lastSeen, source.lastSeen);
  for (const [h, n] of Object.entries(source.hourly)) target.hourly[h] = (target.hourly[h] ?? 0) + n;
  target.userAgents = uniqueBounded([...target.userAgents, ...source.userAgents]);
  target.sourceIPs = uniqueBounded([...target.sourceIPs, ...source.sourceIPs]);
  if (source.forwardedIPs) target.forwardedIPs = uniqueBounded([...(target.forwardedIPs ?? []), ...source.forwardedIPs]);
  if (source.warnAfter !== undefined && (target.warnAfter === undefined || source.warnAfter < target.warnAfter)) {
    target.warnAfter = source.warnAfter;
    target.rejectionAt = rejectionTime(source.warnAfter, maxTokenAge);
  }
  if (source.maxSecondsAfterWarning !== undefined) {
    target.maxSecondsAfterWarning = Math.max(target.maxSecondsAfterWarning ?? 0, source.maxSecondsAfterWarning);
  }
  target.pod ??= source.pod;
  target.podUid ??= source.podUid;
  target.node ??= source.node;
  target.credentialId ??= source.credentialId;
  if (source.legacySecret) {
    if (!target.legacySecret) target.legacySecret = { ...source.legacySecret };
    else {
      if (source.legacySecret.kind === 'invalidated') target.legacySecret.kind = 'invalidated';
      target.legacySecret.namespace ??= source.legacySecret.namespace;
    }
  }
  // Attribution of a reloaded 401 record: a direct one wins, else keep what the target has.
  if (source.attribution === DIRECT_ATTRIBUTION) target.attribution = DIRECT_ATTRIBUTION;
}

function subjectOf(use: TokenUse): { subject: string; namespace: string; serviceAccount: string } {
  if (use.kind === 'unauthorized' && !use.subject) {
    return { subject: UNATTRIBUTED, namespace: UNATTRIBUTED, serviceAccount: UNATTRIBUTED };
  }
  const parsed = use.subject ? parseServiceAccountSubject(use.subject) : undefined;
  const namespace = use.namespace ?? parsed?.namespace;
  const serviceAccount = use.serviceAccount ?? parsed?.serviceAccount;
  if (namespace !== undefined && serviceAccount !== undefined) {
    return { subject: use.subject ?? `${SA_PREFIX}${namespace}:${serviceAccount}`, namespace, serviceAccount };
  }
  const subject = use.subject ?? UNKNOWN_SUBJECT;
  return { subject, namespace: NOT_A_SERVICE_ACCOUNT, serviceAccount: subject };
}

function bucketKey(r: TokenRecord): string {
  switch (r.kind) {
    case 'stale-token':
      return `s\0${r.subject}\0${r.podUid ?? r.pod ?? ''}`;
    case 'legacy-token':
      return `l\0${r.subject}\0${r.legacySecret?.namespace ?? r.namespace}\0${r.legacySecret?.name ?? ''}`;
    case 'unauthorized': {
      const who = r.attribution === DIRECT_ATTRIBUTION ? r.subject : '';
      return `u\0${who}\0${[...r.sourceIPs].sort().join(',')}\0${r.userAgents[0] ?? ''}`;
    }
  }
}

/** `${ip}\0${userAgent}` → subjects of stale records seen from that pair. */
type SourceIndex = Map<string, Set<string>>;

function staleSourceIndex(records: TokenRecord[]): SourceIndex {
  const index: SourceIndex = new Map();
  for (const r of records) {
    if (r.kind !== 'stale-token') continue;
    const uas = r.userAgents.length > 0 ? r.userAgents : [''];
    for (const ip of r.sourceIPs) {
      for (const ua of uas) {
        const k = `${ip}\0${ua}`;
        let set = index.get(k);
        if (!set) index.set(k, (set = new Set()));
        set.add(r.subject);
      }
    }
  }
  return index;
}

function attribute(r: TokenRecord, index: SourceIndex): void {
  const ua = r.userAgents[0] ?? '';
  const subjects = new Set<string>();
  let firstIp: string | undefined;
  for (const ip of r.sourceIPs) {
    const hit = index.get(`${ip}\0${ua}`);
    if (!hit) continue;
    firstIp ??= ip;
    for (const s of hit) subjects.add(s);
  }
  if (subjects.size === 1) {
    const subject = [...subjects][0]!;
    const sa = parseServiceAccountSubject(subject);
    r.subject = subject;
    r.namespace = sa?.namespace ?? NOT_A_SERVICE_ACCOUNT;
    r.serviceAccount = sa?.serviceAccount ?? subject;
    r.attribution =
      `inferred: same source IP ${firstIp} and user agent ${ua || '(none)'} as stale uses of ${subject}`;
    return;
  }
  // Nothing matches now: keep an earlier inference (its stale records may have been pruned from the store).
  if (subjects.size === 0 && r.subject !== UNATTRIBUTED && r.attribution?.startsWith('inferred:')) return;
  r.subject = UNATTRIBUTED;
  r.namespace = UNATTRIBUTED;
  r.serviceAccount = UNATTRIBUTED;
  r.attribution = unattributedText(r, [...subjects].sort());
}

function unattributedText(r: TokenRecord, candidates: string[]): string {
  const ips = r.sourceIPs.length > 0 ? r.sourceIPs.join(', ') : '(none)';
  const ua = r.userAgents[0] ?? '(none)';
  if (candidates.length > 1) {
    return `unattributed: source IP ${ips} and user agent ${ua} match stale uses of several subjects (${candidates.join(', ')})`;
  }
  return `unattributed: no stale use came from source IP ${ips} with user agent ${ua}`;
}

function uniqueBounded(values: Iterable<string>): string[] {
  const out: string[] = [];
  for (const v of values) {
    if (out.length >= MAX_DISTINCT_VALUES) break;
    if (v && !out.includes(v)) out.push(v);
  }
  return out;
}

function cloneRecord(r: TokenRecord): TokenRecord {
  const c: TokenRecord = {
    ...r,
    userAgents: [...r.userAgents],
    sourceIPs: [...r.sourceIPs],
    hourly: { ...r.hourly },
  };
  if (r.legacySecret) c.legacySecret = { ...r.legacySecret };
  if (r.forwardedIPs) c.forwardedIPs = [...r.forwardedIPs];
  if (r.overflow) c.overflow = { ...r.overflow };
  return c;
}

const kindOrder: Record<TokenKind, number> = { 'stale-token': 0, 'legacy-token': 1, unauthorized: 2 };

function compareRecords(a: TokenRecord, b: TokenRecord): number {
  return (
    kindOrder[a.kind] - kindOrder[b.kind] ||
    cmp(a.subject, b.subject) ||
    cmp(a.pod ?? '', b.pod ?? '') ||
    (a.warnAfter ?? 0) - (b.warnAfter ?? 0) ||
    a.firstSeen - b.firstSeen ||
    cmp(a.sourceIPs.join(','), b.sourceIPs.join(',')) ||
    cmp(a.userAgents[0] ?? '', b.userAgents[0] ?? '')
  );
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
