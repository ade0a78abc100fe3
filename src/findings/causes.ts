/**
 * Cause analysis: why a ServiceAccount's client keeps presenting a stale (or legacy, or rejected)
 * token, and what fixes it.
 *
 * Two layers:
 * 1. the **catalog** (`catalog.json`, validated by {@link parseCatalog}) of known offenders from
 *    shared/docs/domain.md §6, each backed by public issues; matched on container images in cluster
 *    state (versions come from image tags, never from client-go user agents, which often say
 *    `v0.0.0`, domain.md §5), then on user-agent prefixes, then on the ServiceAccount;
 * 2. **generic evidence rules** for everything else (most offenders are in no catalog):
 *    - token still used while its pod is gone, or issued before the running pod of that name started,
 *      or a pod mounting hostPath `/etc/cni…` → `static-token-file` (the token lives outside the pod);
 *    - otherwise a stale token → `client-caches-token` (KEP-1205: clients must re-read the projected
 *      token file; EKS user guide lists the library versions that do), with token age vs pod age;
 *    - legacy kind → `legacy-secret-token`;
 *    - 401s tied to no subject and no known client → `unknown`.
 *
 * Pure: no I/O; `now` is passed in.
 */
import { z } from 'zod';
import catalogJson from './catalog.json' with { type: 'json' };
import { parseImageRef } from '../cluster/convert.js';
import type { PodInfo, SubjectState } from '../cluster/types.js';
import { issuedTime } from './token-math.js';
import type { Cause, CauseId, FindingKind, TokenRecord } from './types.js';

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

/** EKS user guide, service accounts: stale-token detection and client library versions that re-read the token. */
export const EKS_SERVICE_ACCOUNTS_GUIDE = 'https://docs.aws.amazon.com/eks/latest/userguide/service-accounts.html';
/** KEP-1205 Bound Service Account Tokens (clients must reload the projected token). */
export const KEP_1205 =
  'https://github.com/kubernetes/enhancements/blob/master/keps/sig-auth/1205-bound-service-account-tokens/README.md';
/** KEP-2799 Reduction of Secret-based Service Account Tokens (legacy-token tracking and cleanup). */
export const KEP_2799 =
  'https://github.com/kubernetes/enhancements/blob/master/keps/sig-auth/2799-reduction-of-secret-based-service-account-token/README.md';
/** Kubernetes docs: managing service accounts, legacy ServiceAccount token tracking and cleaner. */
export const K8S_SA_ADMIN_DOC = 'https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/';

// ---------------------------------------------------------------------------------------------
// Catalog
// ---------------------------------------------------------------------------------------------

const versionRange = z.strictObject({ from: z.string().min(1).optional(), below: z.string().min(1).optional() });
const regexString = z.string().refine((s) => {
  try {
    new RegExp(s);
    return true;
  } catch {
    return false;
  }
}, 'not a valid regular expression');

const catalogEntry = z.strictObject({
  id: z.string().min(1),
  component: z.string().min(1),
  name: z.string().min(1),
  cause: z.enum(['static-token-file', 'client-caches-token', 'refresh-on-401']),
  match: z.strictObject({
    images: z.array(z.string().min(1)).optional(),
    versions: z.array(versionRange).min(1).optional(),
    versionNote: z.string().min(1).optional(),
    excludeImages: z.array(z.string().min(1)).optional(),
    excludeCommands: z.array(z.string().min(1)).optional(),
    excludeNote: z.string().min(1).optional(),
    unlessAllArgs: z.array(z.string().min(1)).min(1).optional(),
    unlessArgsNote: z.string().min(1).optional(),
    userAgents: z.array(z.string().min(1)).optional(),
    userAgentVersion: regexString.optional(),
    serviceAccounts: z.array(z.strictObject({ namespace: z.string().min(1).optional(), name: z.string().min(1) })).optional(),
  }),
  fixedIn: z.string().min(1).nullable(),
  summary: z.string().min(1),
  fix: z.string().min(1),
  sources: z.array(z.url()).min(1),
});

const catalogSchema = z.strictObject({
  version: z.literal(1),
  description: z.string().optional(),
  entries: z.array(catalogEntry),
});

/** One known offender (see `catalog.json` `description` for the match rules). */
export type CatalogEntry = z.infer<typeof catalogEntry>;
/** The cause catalog: entries matched in order, first match wins. */
export type CauseCatalog = z.infer<typeof catalogSchema>;

/**
 * Validates a catalog document (the shape of `catalog.json`).
 * @throws Error listing every problem (bad field, bad URL, bad regex, duplicate id).
 */
export function parseCatalog(json: unknown): CauseCatalog {
  const parsed = catalogSchema.safeParse(json);
  if (!parsed.success) throw new Error(`invalid cause catalog:\n${z.prettifyError(parsed.error)}`);
  const seen = new Set<string>();
  for (const e of parsed.data.entries) {
    if (seen.has(e.id)) throw new Error(`invalid cause catalog: duplicate entry id "${e.id}"`);
    seen.add(e.id);
  }
  return parsed.data;
}

/** The built-in catalog (`src/findings/catalog.json`). */
export const DEFAULT_CATALOG: CauseCatalog = parseCatalog(catalogJson);

// ---------------------------------------------------------------------------------------------
// Versions and images
// ---------------------------------------------------------------------------------------------

/**
 * The numeric version in an image tag or library version: `v3.7.2-eksbuild.1` → `[3,7,2]`,
 * `1.9.3-debug` → `[1,9,3]`, `2.31.12.20231011` → `[2,31,12]`, `release-3.22` → `[3,22]`;
 * undefined when there is none (`latest`, `stable`).
 */
export function parseVersion(s: string): number[] | undefined {
  const m = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?/i.exec(s) ?? /(\d+)\.(\d+)(?:\.(\d+))?/.exec(s);
  if (!m) return undefined;
  return [m[1], m[2], m[3]].filter((p): p is string => p !== undefined).map(Number);
}

/** Compares versions numerically, missing parts counting as 0. Negative when `a < b`. */
export function compareVersions(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length, 3); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The range of `ranges` containing `v` (from inclusive, below exclusive), if any. */
function rangeOf(v: number[], ranges: CatalogEntry['match']['versions']): { from?: string; below?: string } | undefined {
  return ranges?.find((r) => {
    const from = r.from !== undefined ? parseVersion(r.from) : undefined;
    const below = r.below !== undefined ? parseVersion(r.below) : undefined;
    return (!from || compareVersions(v, from) >= 0) && (!below || compareVersions(v, below) < 0);
  });
}

/** Whether an image repository (no registry host) ends with the catalog's path suffix, on whole path segments. */
function repositoryMatches(repository: string, suffix: string): boolean {
  const r = repository.toLowerCase();
  const s = suffix.toLowerCase();
  return r === s || r.endsWith(`/${s}`);
}

// ---------------------------------------------------------------------------------------------
// Classification
// ---------------------------------------------------------------------------------------------

/** Input of {@link classifyCause}. Times are epoch ms UTC. */
export interface CauseInput {
  kind: FindingKind;
  /**
   * Token records of the finding. For `unauthorized` findings, pass the subject's stale records too:
   * they carry the pods and user agents that identify the client.
   */
  records: TokenRecord[];
  /** Cluster state of the ServiceAccount, when known. */
  state?: SubjectState;
  /** Reference time for ages ("token issued 83 days ago"). */
  now: number;
  /**
   * End of the audit data (latest `lastSeen` of all records read); a token used within the hour
   * before it is "still in use". Default: the latest `lastSeen` of `records`.
   */
  dataEnd?: number;
}

/** A container (or pod template) whose image and args a catalog entry is matched against. */
interface Candidate {
  image: string;
  repository: string;
  tag?: string;
  command: string[];
  args: string[];
}

interface Context {
  records: TokenRecord[];
  stale: TokenRecord[];
  state?: SubjectState;
  stateKnown: boolean;
  /** Pods of the state that tokens name (by uid, else by name). */
  tokenPods: PodInfo[];
  candidates: Candidate[];
  userAgents: string[];
  serviceAccount?: { namespace: string; name: string };
  now: number;
  dataEnd: number;
}

type EntryResult =
  | { status: 'match'; evidence: string[] }
  | { status: 'ruled-out'; evidence: string[] }
  | { status: 'none' };

/**
 * The cause of one finding.
 *
 * Order: legacy kind → `legacy-secret-token`; the catalog in three stages — images (all entries),
 * then user agents, then ServiceAccounts (only when no image is known) — first match wins; generic
 * `static-token-file` evidence; `client-caches-token` for any stale token; `unknown` otherwise
 * (401s tied to no subject and no known client). A catalog entry that recognises the component but
 * rules its known issue out (fixed version, thick plugin, the right args) adds its reason to the
 * evidence, and the hostPath heuristic is then not applied to that component.
 */
export function classifyCause(input: CauseInput, catalog: CauseCatalog = DEFAULT_CATALOG): Cause {
  const ctx = contextOf(input);
  if (input.kind === 'legacy-token') return legacyCause(ctx);

  const extra = [...attributionEvidence(ctx), ...ageEvidence(ctx)];
  const ruledOut: string[] = [];
  const explained: string[] = [];
  const stages: ((e: CatalogEntry) => EntryResult)[] = [
    (e) => matchImages(e, ctx),
    (e) => matchUserAgents(e, ctx, explained),
    (e) => matchServiceAccount(e, ctx),
  ];
  for (const stage of stages) {
    for (const entry of catalog.entries) {
      const r = stage(entry);
      if (r.status === 'match') {
        return {
          id: entry.cause,
          component: entry.component,
          summary: entry.summary,
          fix: entry.fix,
          evidence: dedupe([...r.evidence, ...extra]),
          sources: [...entry.sources],
        };
      }
      if (r.status === 'ruled-out') {
        ruledOut.push(...r.evidence);
        explained.push(...(entry.match.userAgents ?? []));
      }
    }
  }

  const outside = outsidePodEvidence(ctx);
  const hostPaths = ruledOut.length === 0 ? hostPathEvidence(ctx) : [];
  if (outside.length > 0 || hostPaths.length > 0) {
    return generic('static-token-file', [...outside, ...hostPaths, ...ruledOut, ...extra, ...clientEvidence(ctx)]);
  }
  if (ctx.stale.length > 0 || (input.kind === 'unauthorized' && ctx.records.some((r) => r.attribution?.startsWith('inferred:')))) {
    return generic('client-caches-token', [...ruledOut, ...extra, ...staleEvidence(ctx), ...clientEvidence(ctx)]);
  }
  if (input.kind === 'unauthorized') return generic('unknown', [...ruledOut, ...extra, ...clientEvidence(ctx)]);
  return generic('unknown', [...ruledOut, ...clientEvidence(ctx)]);
}

const GENERIC: Record<Exclude<CauseId, 'legacy-secret-token'>, { summary: string; fix: string; sources: string[] }> = {
  'static-token-file': {
    summary:
      'The token is presented from outside the pod (e.g. copied into a kubeconfig or file on the host) and that copy is never refreshed when the kubelet rotates the projected token.',
    fix:
      'Change the component so it reads the projected token file at use time, or regenerates its copy whenever the token rotates (look for a kubeconfig it writes under /etc/cni/net.d or another host path). A rollout restart rewrites the copy with a fresh token but only buys one more period (90 days on EKS).',
    sources: [KEP_1205, EKS_SERVICE_ACCOUNTS_GUIDE],
  },
  'client-caches-token': {
    summary:
      'The client read the ServiceAccount token once and keeps presenting it; the kubelet rotates the projected token file about hourly, but the process never re-reads it.',
    fix:
      'Upgrade the client library to one that re-reads the token file (client-go ≥ 0.15.7, Python ≥ 12.0.0, Java ≥ 9.0.0, JavaScript ≥ 0.10.3, C# ≥ 7.0.5, Haskell ≥ 0.3.0.0) and make sure the program does not build its client once or copy the token. A rollout restart gives a fresh token but only buys one more period (90 days on EKS).',
    sources: [EKS_SERVICE_ACCOUNTS_GUIDE, KEP_1205],
  },
  'refresh-on-401': {
    summary:
      'The client re-reads the token only after a request fails with 401, so it keeps the stale token until the API server rejects it.',
    fix:
      'Upgrade the client to one that re-reads the token file periodically. A rollout restart gives a fresh token but only buys one more period.',
    sources: [KEP_1205],
  },
  unknown: {
    summary:
      'Requests were rejected with 401 (authentication failed) and could not be tied to a ServiceAccount or a known client.',
    fix:
      'Find the client by its source IP and user agent (the pod or node with that IP); if it is a ServiceAccount client, restart it for a fresh token and upgrade it to a library that re-reads the token file.',
    sources: [EKS_SERVICE_ACCOUNTS_GUIDE],
  },
};

function generic(id: Exclude<CauseId, 'legacy-secret-token'>, evidence: string[]): Cause {
  const g = GENERIC[id];
  return { id, component: null, summary: g.summary, fix: g.fix, evidence: dedupe(evidence), sources: [...g.sources] };
}

function contextOf(input: CauseInput): Context {
  const { records, state, now } = input;
  const stale = records.filter((r) => r.kind === 'stale-token');
  const stateKnown = state?.available === true;
  const pods = stateKnown ? state.pods : [];
  const tokenPods: PodInfo[] = [];
  for (const p of pods) if (stale.some((r) => sameTokenPod(r, p))) tokenPods.push(p);

  const candidates: Candidate[] = [];
  for (const p of tokenPods.length > 0 ? tokenPods : pods) {
    for (const c of p.containers) {
      const cand: Candidate = { image: c.image, repository: c.imageRepository, command: c.command, args: c.args };
      if (c.imageTag !== undefined) cand.tag = c.imageTag;
      candidates.push(cand);
    }
  }
  if (candidates.length === 0 && stateKnown) {
    for (const w of state.workloads) {
      for (const image of w.images) {
        const ref = parseImageRef(image);
        const cand: Candidate = { image, repository: ref.repository, command: [], args: w.args };
        if (ref.tag !== undefined) cand.tag = ref.tag;
        candidates.push(cand);
      }
    }
  }

  const userAgents = dedupe(records.flatMap((r) => r.userAgents)).sort();
  const first = records.find((r) => r.kind !== 'unauthorized' || r.attribution?.startsWith('inferred:'));
  const ctx: Context = {
    records,
    stale,
    stateKnown,
    tokenPods,
    candidates,
    userAgents,
    now,
    dataEnd: input.dataEnd ?? records.reduce((m, r) => Math.max(m, r.lastSeen), -Infinity),
  };
  if (state) ctx.state = state;
  if (first) ctx.serviceAccount = { namespace: first.namespace, name: first.serviceAccount };
  return ctx;
}

/** Whether a stale token record names this pod (uid when both are known, else name). */
export function sameTokenPod(r: TokenRecord, p: PodInfo): boolean {
  if (r.podUid && p.uid) return r.podUid === p.uid;
  return r.pod !== undefined && r.pod === p.name;
}

/** Stage 1: container images in cluster state (versions from image tags). */
function matchImages(entry: CatalogEntry, ctx: Context): EntryResult {
  const m = entry.match;
  if (!m.images || ctx.candidates.length === 0) return { status: 'none' };
  const ruledOut: string[] = [];
  const hits = ctx.candidates.filter((c) => m.images!.some((s) => repositoryMatches(c.repository, s)));
  for (const c of hits) {
    const cmdline = [...c.command, ...c.args].join(' ');
    if (m.excludeImages?.some((x) => c.image.includes(x)) || m.excludeCommands?.some((x) => cmdline.includes(x))) {
      ruledOut.push(`image ${c.image}: ${m.excludeNote ?? `not affected (${entry.name})`}`);
      continue;
    }
    const v = c.tag !== undefined ? parseVersion(c.tag) : undefined;
    const range = v && m.versions ? rangeOf(v, m.versions) : undefined;
    if (v && m.versions && !range) {
      ruledOut.push(`image ${c.image}: version ${v.join('.')} is outside the affected versions of ${entry.name}`);
      continue;
    }
    if (m.unlessAllArgs?.every((a) => c.args.includes(a) || c.command.includes(a))) {
      ruledOut.push(`image ${c.image} runs with ${m.unlessAllArgs.join(' and ')}: ${m.unlessArgsNote ?? 'not affected'}`);
      continue;
    }
    let note: string;
    if (!m.versions) note = entry.name;
    else if (!v) note = `${entry.name}; version unknown from tag ${c.tag ?? '(none)'}`;
    else note = m.versionNote ?? `${entry.name} ${v.join('.')} < ${range?.below ?? entry.fixedIn}`;
    return { status: 'match', evidence: [`image ${c.image} (${note})`] };
  }
  return ruledOut.length > 0 ? { status: 'ruled-out', evidence: ruledOut } : { status: 'none' };
}

/**
 * Stage 2: user-agent prefixes. `explained` holds prefixes of entries whose image stage recognised
 * the component and ruled it out: a user agent starting with one of them belongs to that component.
 */
function matchUserAgents(entry: CatalogEntry, ctx: Context, explained: string[]): EntryResult {
  const m = entry.match;
  if (!m.userAgents) return { status: 'none' };
  const ruledOut: string[] = [];
  for (const ua of ctx.userAgents) {
    const lower = ua.toLowerCase();
    if (!m.userAgents.some((p) => lower.startsWith(p.toLowerCase()))) continue;
    if (explained.some((p) => lower.startsWith(p.toLowerCase()))) continue;
    if (m.userAgentVersion) {
      const vm = new RegExp(m.userAgentVersion).exec(ua);
      if (!vm || vm[1] === undefined) continue; // same prefix, another client
      const v = parseVersion(vm[1]);
      const range = v && m.versions ? rangeOf(v, m.versions) : undefined;
      if (v && m.versions && !range) {
        ruledOut.push(`user agent "${ua}": version ${v.join('.')} is outside the affected versions of ${entry.name}`);
        continue;
      }
      const note = v ? `${entry.name} ${v.join('.')} < ${range?.below ?? entry.fixedIn}` : `${entry.name}, version unknown`;
      return { status: 'match', evidence: [`user agent "${ua}" (${note})`] };
    }
    const unknownVersion = m.versions
      ? ctx.stateKnown
        ? '; version unknown: no matching container image in cluster state'
        : '; version unknown: no cluster state'
      : '';
    return { status: 'match', evidence: [`user agent "${ua}" identifies ${entry.name}${unknownVersion}`] };
  }
  return ruledOut.length > 0 ? { status: 'ruled-out', evidence: ruledOut } : { status: 'none' };
}

/** Stage 3: the ServiceAccount, only when cluster state shows no image at all. */
function matchServiceAccount(entry: CatalogEntry, ctx: Context): EntryResult {
  const sa = ctx.serviceAccount;
  if (!entry.match.serviceAccounts || ctx.candidates.length > 0 || !sa) return { status: 'none' };
  const hit = entry.match.serviceAccounts.some(
    (s) => s.name === sa.name && (s.namespace === undefined || s.namespace === sa.namespace),
  );
  if (!hit) return { status: 'none' };
  return {
    status: 'match',
    evidence: [`ServiceAccount ${sa.namespace}/${sa.name} is the one ${entry.name} uses (no container image known to confirm)`],
  };
}

/** Stale tokens used from outside their pod: pod gone while the token is still in use, or token older than the pod. */
function outsidePodEvidence(ctx: Context): string[] {
  if (!ctx.stateKnown || !ctx.state) return [];
  const out: string[] = [];
  for (const r of ctx.stale) {
    if (r.pod === undefined && r.podUid === undefined) continue;
    const label = r.pod ?? r.podUid!;
    const running = ctx.state.pods.find((p) => sameTokenPod(r, p));
    const byName = r.pod !== undefined ? ctx.state.pods.find((p) => p.name === r.pod) : undefined;
    const inUse = r.lastSeen >= ctx.dataEnd - HOUR_MS;
    if (!running && byName && inUse) {
      out.push(
        `token of an earlier pod ${label} (uid ${r.podUid ?? 'unknown'}) still used at ${iso(r.lastSeen)}; the running pod ${byName.name} has uid ${byName.uid ?? 'unknown'}: the token is presented from outside the pod (e.g. a file on the host)`,
      );
    } else if (!running && inUse) {
      out.push(
        `token of pod ${label} still used at ${iso(r.lastSeen)}, but the pod is gone from cluster state: the token is presented from outside the pod (e.g. a file on the host)`,
      );
    } else if (running?.startTime !== undefined && r.warnAfter !== undefined) {
      const issued = issuedTime(r.warnAfter);
      if (issued < running.startTime - HOUR_MS) {
        out.push(
          `token issued ${iso(issued)}, before pod ${running.name} started (${iso(running.startTime)}): the token was copied out of an earlier pod`,
        );
      }
    }
  }
  return out;
}

/** Pods that mount a CNI config directory from the host. */
function hostPathEvidence(ctx: Context): string[] {
  if (!ctx.stateKnown || !ctx.state) return [];
  const pods = ctx.tokenPods.length > 0 ? ctx.tokenPods : ctx.state.pods;
  const out: string[] = [];
  for (const p of pods) {
    for (const h of p.hostPaths) {
      if (h === '/etc/cni' || h.startsWith('/etc/cni/')) {
        out.push(`pod ${p.name} mounts hostPath ${h} (CNI plugins write a kubeconfig holding the token there)`);
      }
    }
  }
  return out;
}

/** Token age vs pod age for the oldest stale token whose pod is running. */
function ageEvidence(ctx: Context): string[] {
  let best: { r: TokenRecord; p: PodInfo } | undefined;
  for (const r of ctx.stale) {
    if (r.warnAfter === undefined) continue;
    const p = ctx.tokenPods.find((pod) => sameTokenPod(r, pod));
    if (!p || p.startTime === undefined) continue;
    if (!best || r.warnAfter < best.r.warnAfter!) best = { r, p };
  }
  if (!best) return [];
  const issued = issuedTime(best.r.warnAfter!);
  const start = best.p.startTime!;
  const text = `token issued ${days(ctx.now - issued)} days ago, pod ${best.p.name} started ${days(ctx.now - start)} days ago`;
  if (Math.abs(issued - start) <= HOUR_MS) return [`${text}: issued at pod start and never renewed while the pod runs`];
  if (issued > start) return [`${text}: the client took a later token once, then kept it`];
  return [text];
}

function staleEvidence(ctx: Context): string[] {
  if (ctx.stale.length === 0) return [];
  const max = ctx.stale.reduce((m, r) => Math.max(m, r.maxSecondsAfterWarning ?? 0), 0);
  const tokens = ctx.stale.length;
  return [
    `${tokens} stale token${tokens === 1 ? '' : 's'} in use, up to ${max} s (${days(max * 1000)} days) past the warnafter point`,
  ];
}

function attributionEvidence(ctx: Context): string[] {
  return dedupe(ctx.records.filter((r) => r.kind === 'unauthorized' && r.attribution).map((r) => r.attribution!));
}

function clientEvidence(ctx: Context): string[] {
  const out: string[] = [];
  if (ctx.userAgents.length > 0) out.push(`user agent ${ctx.userAgents.slice(0, 3).map((u) => `"${u}"`).join(', ')}`);
  const images = dedupe(ctx.candidates.map((c) => c.image));
  if (images.length > 0) out.push(`image ${images.slice(0, 3).join(', ')}`);
  return out;
}

function legacyCause(ctx: Context): Cause {
  const evidence: string[] = [];
  const legacy = ctx.records.filter((r) => r.kind === 'legacy-token');
  for (const r of legacy) {
    const s = r.legacySecret;
    if (!s) {
      evidence.push(
        `legacy (Secret-based) token used ${r.requests} times, last at ${iso(r.lastSeen)}; the audit events do not name the Secret (API server before 1.29)`,
      );
      continue;
    }
    const ns = s.namespace ?? r.namespace;
    const how =
      s.kind === 'invalidated'
        ? 'invalidated (annotation authentication.k8s.io/legacy-token-invalidated)'
        : `${s.kind} (annotation authentication.k8s.io/legacy-token-${s.kind}-secret)`;
    evidence.push(`Secret ${ns}/${s.name}: legacy token ${how}, used ${r.requests} times, last at ${iso(r.lastSeen)}`);
    const info = ctx.stateKnown ? ctx.state?.legacySecrets.find((x) => x.name === s.name && x.namespace === ns) : undefined;
    if (info?.lastUsed) evidence.push(`Secret ${ns}/${s.name} label kubernetes.io/legacy-token-last-used: ${info.lastUsed}`);
    if (info?.invalidSince) evidence.push(`Secret ${ns}/${s.name} label kubernetes.io/legacy-token-invalid-since: ${info.invalidSince}`);
  }
  evidence.push(...clientEvidence(ctx));
  return {
    id: 'legacy-secret-token',
    component: null,
    summary:
      'The client authenticates with a long-lived legacy token from a kubernetes.io/service-account-token Secret instead of a bound, rotating projected token.',
    fix:
      'Move the client to a bound token (the default kube-api-access projected volume or a serviceAccountToken projection, read from the file at use time), then delete the Secret. Kubernetes 1.30+ (LegacyServiceAccountTokenCleanUp) invalidates auto-generated legacy tokens left unused.',
    evidence: dedupe(evidence),
    sources: [KEP_2799, K8S_SA_ADMIN_DOC],
  };
}

function days(ms: number): number {
  return Math.floor(ms / DAY_MS);
}

function iso(t: number): string {
  return new Date(t).toISOString();
}

function dedupe(xs: string[]): string[] {
  return [...new Set(xs)];
}
