/**
 * Cause analysis: why a ServiceAccount's client keeps presenting a stale (or legacy, or rejected)
 * token, and what fixes it.
 *
 * Two layers:
 * 1. the **catalog** (`catalog.json`, validated by `parseCatalog` in catalog-schema.ts) of known offenders from
 *    docs/design/domain.md §6, each backed by public issues; matched on container images in cluster
 *    state (versions come from image tags, never from client-go user agents, which often say
 *    `v0.0.0`, docs/design/domain.md §5), then on user-agent prefixes, then on the ServiceAccount;
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
// The three functions used, not the whole of `semver` (its index loads ~40 modules: start-up time, docs/design/architecture.md "Performance targets").
import semverCoerce from 'semver/functions/coerce.js';
import semverSatisfies from 'semver/functions/satisfies.js';
import catalogJson from './catalog.json' with { type: 'json' };
import type { CatalogEntryShape, CauseCatalogShape } from './catalog-schema.js';
import { nearestWorkload, parseImageRef } from '../cluster/convert.js';
import type { PodInfo, SubjectState } from '../cluster/types.js';
import { issuedTime } from './token-math.js';
import type { Cause, CauseId, FindingKind, TokenRecord } from './types.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../core/units.js';

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

/** One known offender (see `catalog.json` `description` for the match rules). */
export type CatalogEntry = CatalogEntryShape;
/** The cause catalog: entries matched in order, first match wins. */
export type CauseCatalog = CauseCatalogShape;

/** The built-in catalog (`src/findings/catalog.json`). */
// Trusted as shipped: test/findings/causes.test.ts validates it with `parseCatalog` (catalog-schema.ts), which
// loads zod — kept out of this module so a scan does not pay zod's start-up (~60 ms) for the built-in catalog.
export const DEFAULT_CATALOG: CauseCatalog = catalogJson as unknown as CauseCatalog;

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

function toSemver(v: number[]): string {
  return `${v[0] ?? 0}.${v[1] ?? 0}.${v[2] ?? 0}`;
}

/** A catalog version range as an npm `semver` range: `{from, below}` → `>=from <below` (coerced), strings as written. */
function semverRange(r: string | { from?: string; below?: string }): string {
  if (typeof r === 'string') return r;
  const parts: string[] = [];
  const from = r.from !== undefined ? semverCoerce(r.from) : null;
  const below = r.below !== undefined ? semverCoerce(r.below) : null;
  if (from) parts.push(`>=${from.version}`);
  if (below) parts.push(`<${below.version}`);
  return parts.length > 0 ? parts.join(' ') : '*';
}

/** `< 1.9.4` for a range with an upper bound, else `(affected: <range>)`. */
function affectedText(range: string | { from?: string; below?: string } | undefined, entry: CatalogEntry): string {
  if (range !== undefined && typeof range !== 'string' && range.below !== undefined) return `< ${range.below}`;
  if (range !== undefined) return `(affected: ${rangeText(range)})`;
  return `< ${entry.fixedIn ?? '?'}`;
}

/** Human text of a catalog range (`< 1.9.4`, `>=6.0.0 <6.1.0`). */
function rangeText(r: string | { from?: string; below?: string }): string {
  if (typeof r === 'string') return r;
  if (r.from === undefined && r.below !== undefined) return `< ${r.below}`;
  return semverRange(r);
}

/**
 * The range of `ranges` containing `v`, if any, matched with npm `semver` (`satisfies`, pre-release tags ignored:
 * `v3.7.2-eksbuild.1` counts as 3.7.2).
 */
function rangeOf(
  v: number[],
  ranges: CatalogEntry['match']['versions'],
): string | { from?: string; below?: string } | undefined {
  const sv = toSemver(v);
  return ranges?.find((r) => semverSatisfies(sv, semverRange(r), { includePrerelease: true }));
}

/**
 * Whether an image repository (no registry host) is the catalog's repository: it ends with the catalog's path suffix
 * on whole path segments (`eks/multus-cni`, `mirror/docker.io/calico/cni`), or it is a distribution's rebuild or
 * mirror of it, whose last segment is `hardened-<name>` or `mirrored-<org>-<name>` (Rancher RKE2:
 * `rancher/hardened-multus-cni`, `rancher/mirrored-calico-cni`, `rancher/mirrored-istio-install-cni`).
 */
export function repositoryMatches(repository: string, suffix: string): boolean {
  const r = repository.toLowerCase();
  const s = suffix.toLowerCase();
  if (r === s || r.endsWith(`/${s}`)) return true;
  const last = r.slice(r.lastIndexOf('/') + 1);
  const rebuilt = /^(?:hardened|mirrored)-(.+)$/.exec(last)?.[1];
  if (rebuilt === undefined) return false;
  return rebuilt === s.replaceAll('/', '-') || (!s.includes('/') && rebuilt === s);
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
  /**
   * 401 records attributed to this finding's subject (by source IP and user agent), for stale-token findings: 401s
   * that arrive after a token's pod was replaced show that something outside the pod presents that token.
   */
  unauthorized?: TokenRecord[];
}

/** A container (or pod template) whose image and args a catalog entry is matched against. */
interface Candidate {
  image: string;
  repository: string;
  tag?: string;
  command: string[];
  args: string[];
  /** Literal env values of the container (none for pod templates). */
  env: Record<string, string>;
}

interface Context {
  records: TokenRecord[];
  unauthorized: TokenRecord[];
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
  /** `fix`: replaces the entry's fix (a setting undid the fix, or the user agent is ambiguous). */
  | { status: 'match'; evidence: string[]; fix?: string; sources?: string[] }
  /** `fixed`: ruled out because the version found already has the fix (the component itself refreshes). */
  | { status: 'ruled-out'; evidence: string[]; fixed?: string[]; otherReason?: boolean }
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
  const fixedBy = new Map<string, string[]>();
  const notFixed = new Set<string>();
  const explained: string[] = [];
  const stages: ((e: CatalogEntry) => EntryResult)[] = [
    (e) => matchImages(e, ctx),
    (e) => matchLabels(e, ctx),
    (e) => matchUserAgents(e, ctx, explained, catalog),
    (e) => matchServiceAccount(e, ctx),
  ];
  for (const [stageIndex, stage] of stages.entries()) {
    for (const entry of catalog.entries) {
      const r = stage(entry);
      if (r.status === 'match') {
        return {
          id: entry.cause,
          component: entry.component,
          summary: entry.summary,
          fix: r.fix ?? entry.fix,
          evidence: cappedEvidence([...r.evidence, ...(entry.evidenceNote ? [entry.evidenceNote] : []), ...extra, ...replacedPodEvidence(ctx)]),
          sources: dedupe([...entry.sources, ...(r.sources ?? [])]),
        };
      }
      if (r.status === 'ruled-out') {
        ruledOut.push(...r.evidence);
        if (r.otherReason || !r.fixed?.length) notFixed.add(entry.component);
        else fixedBy.set(entry.component, [...(fixedBy.get(entry.component) ?? []), ...r.fixed]);
        // Only a component recognised by its image or labels explains its user agents; a user agent ruled out by the
        // version it carries may still be another library's that sends the same scheme (see `ambiguousReading`).
        if (stageIndex < 2) explained.push(...(entry.match.userAgents ?? []));
      }
    }
  }

  // A component counts as "already fixed" only when every entry of it was ruled out by its version.
  const fixed = [...fixedBy.entries()].filter(([c]) => !notFixed.has(c)).flatMap(([, e]) => e);
  const outside = outsidePodEvidence(ctx);
  // What the cluster shows outranks a version rule: a hostPath into a CNI directory counts unless a catalog entry
  // ruled the component out for another reason than its version (e.g. the Multus thick plugin, which mounts it too).
  const hostPaths = notFixed.size === 0 ? hostPathEvidence(ctx) : [];
  const replaced = replacedPodEvidence(ctx);
  if (outside.length > 0 || hostPaths.length > 0) {
    return generic('static-token-file', [...outside, ...hostPaths, ...ruledOut, ...extra, ...replaced, ...clientEvidence(ctx)]);
  }
  if (ctx.stale.length > 0 || (input.kind === 'unauthorized' && ctx.records.some((r) => r.attribution?.startsWith('inferred:')))) {
    const evidence = [...ruledOut, ...fixed, ...extra, ...staleEvidence(ctx), ...replaced, ...clientEvidence(ctx)];
    if (fixed.length > 0) return { ...generic('client-caches-token', evidence), fix: OWN_TOKEN_FIX };
    return generic('client-caches-token', evidence);
  }
  if (input.kind === 'unauthorized') return generic('unknown', [...ruledOut, ...extra, ...clientEvidence(ctx)]);
  return generic('unknown', [...ruledOut, ...clientEvidence(ctx)]);
}

/**
 * Fix of `client-caches-token` when the client library (or component) found is a version that already re-reads the
 * token: upgrading it would change nothing, the application keeps its own copy.
 */
export const OWN_TOKEN_FIX =
  'The client library already re-reads the projected token file; this application keeps a token of its own. Find where it reads /var/run/secrets/kubernetes.io/serviceaccount/token once (a bearer or OAuth token put into its client configuration, or a client built once at start and kept) and let the library load the in-cluster configuration itself, or re-read the file at use time. A rollout restart gives a fresh token but only buys one more period (90 days on EKS).';

const GENERIC: Record<Exclude<CauseId, 'legacy-secret-token' | 'cluster-credential-change'>, { summary: string; fix: string; sources: string[] }> = {
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

function generic(id: Exclude<CauseId, 'legacy-secret-token' | 'cluster-credential-change'>, evidence: string[]): Cause {
  const g = GENERIC[id];
  return { id, component: null, summary: g.summary, fix: g.fix, evidence: cappedEvidence(evidence), sources: [...g.sources] };
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
      const cand: Candidate = { image: c.image, repository: c.imageRepository, command: c.command, args: c.args, env: c.env ?? {} };
      if (c.imageTag !== undefined) cand.tag = c.imageTag;
      candidates.push(cand);
    }
  }
  if (candidates.length === 0 && stateKnown) {
    for (const w of state.workloads) {
      for (const image of w.images) {
        const ref = parseImageRef(image);
        const cand: Candidate = { image, repository: ref.repository, command: [], args: w.args, env: {} };
        if (ref.tag !== undefined) cand.tag = ref.tag;
        candidates.push(cand);
      }
    }
  }

  const userAgents = dedupe(records.flatMap((r) => r.userAgents)).sort();
  const first = records.find((r) => r.kind !== 'unauthorized' || r.attribution?.startsWith('inferred:'));
  const ctx: Context = {
    records,
    unauthorized: [
      ...records.filter((r) => r.kind === 'unauthorized' && r.attribution?.startsWith('inferred:')),
      ...(input.unauthorized ?? []),
    ],
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

/**
 * Why a pod may be the client behind a user agent, or undefined: its container image is a catalog component whose
 * user-agent prefix the user agent starts with, or the user agent's product (`multus` in `multus/v0.0.0 (…)`) names
 * one of its containers or images (`multus`, `multus-cni`, `kube-multus`). Used to attribute 401s by source IP.
 */
export function podMatchesUserAgent(pod: PodInfo, userAgent: string, catalog: CauseCatalog = DEFAULT_CATALOG): string | undefined {
  const ua = userAgent.toLowerCase();
  for (const e of catalog.entries) {
    if (!e.match.images || !e.match.userAgents?.some((p) => ua.startsWith(p.toLowerCase()))) continue;
    const c = pod.containers.find((x) => e.match.images!.some((s) => repositoryMatches(x.imageRepository, s)));
    if (c) return `image ${c.image} is ${e.name}, whose user agent starts with ${e.match.userAgents.join(' or ')}`;
  }
  const product = ua.split('/')[0]?.trim() ?? '';
  if (product.length < 3 || /^(go-http-client|java|python-requests|curl|okhttp|kubectl|mozilla)$/.test(product)) return undefined;
  const named = (n: string) => {
    const x = n.toLowerCase();
    return x === product || x.startsWith(`${product}-`) || x.endsWith(`-${product}`);
  };
  for (const c of pod.containers) {
    const seg = c.imageRepository.slice(c.imageRepository.lastIndexOf('/') + 1);
    if (named(c.name) || named(seg)) return `container ${c.name} (${c.image}) is named like the user agent's program "${product}"`;
  }
  return undefined;
}

/**
 * The pod that replaced the (gone) pod of a token, among `pods` (cluster state): the running pod of the same name (a
 * StatefulSet pod, a recreated bare pod), else the earliest-started pod of the same workload — the nearest
 * restartable controller, CronJob or Job whose name plus `-` starts the token's pod name (`<deployment>-<hash>-<id>`,
 * `<daemonset>-<id>`) — that started after the token was first used. Undefined when none is known; `r`'s own pod
 * (same uid) is never its successor.
 */
export function successorPod(r: TokenRecord, pods: readonly PodInfo[]): PodInfo | undefined {
  if (r.pod === undefined) return undefined;
  const same = pods.find((p) => p.name === r.pod && !sameTokenPod(r, p));
  if (same) return same;
  if (pods.some((p) => sameTokenPod(r, p))) return undefined;
  let best: PodInfo | undefined;
  for (const p of pods) {
    if (p.startTime === undefined || p.startTime <= r.firstSeen) continue;
    const w = nearestWorkload(p.ownerChain)?.workload;
    if (!w || !r.pod.startsWith(`${w.name}-`)) continue;
    if (!best || p.startTime < best.startTime!) best = p;
  }
  return best;
}

/** Whether a stale token record names this pod (uid when both are known, else name). */
export function sameTokenPod(r: TokenRecord, p: PodInfo): boolean {
  if (r.podUid && p.uid) return r.podUid === p.uid;
  return r.pod !== undefined && r.pod === p.name;
}

/** Stage 1: container images in cluster state (versions from image tags, compared with npm `semver`). */
function matchImages(entry: CatalogEntry, ctx: Context): EntryResult {
  const m = entry.match;
  if (!m.images || ctx.candidates.length === 0) return { status: 'none' };
  const ruledOut: string[] = [];
  const fixed: string[] = [];
  let otherReason = false;
  const hits = ctx.candidates.filter((c) => m.images!.some((s) => repositoryMatches(c.repository, s)));
  for (const c of hits) {
    const cmdline = [...c.command, ...c.args].join(' ');
    if (m.excludeImages?.some((x) => c.image.includes(x)) || m.excludeCommands?.some((x) => cmdline.includes(x))) {
      ruledOut.push(`image ${c.image}: ${m.excludeNote ?? `not affected (${entry.name})`}`);
      otherReason = true;
      continue;
    }
    const v = c.tag !== undefined ? parseVersion(c.tag) : undefined;
    const range = v && m.versions ? rangeOf(v, m.versions) : undefined;
    if (v && m.versions && !range) {
      const undone = undoingSetting(entry, hits);
      if (undone) {
        return {
          status: 'match',
          evidence: [
            `image ${c.image}: ${entry.name} ${v.join('.')} has the fix (${entry.fixedIn ?? 'see sources'}), but container ${undone.where} sets ${undone.setting}: ${undone.rule.note} (${undone.rule.source})`,
          ],
          fix: undone.rule.fix,
          sources: [undone.rule.source],
        };
      }
      ruledOut.push(`image ${c.image}: version ${v.join('.')} is outside the affected versions of ${entry.name}`);
      fixed.push(
        `image ${c.image}: ${entry.name} ${v.join('.')} already has the fix (${entry.fixedIn ?? 'see sources'}), yet this client presents a stale token: something in the pod keeps a token of its own (its configuration, a plugin or another client in the same pod)`,
      );
      continue;
    }
    if (m.unlessAllArgs?.every((a) => c.args.includes(a) || c.command.includes(a))) {
      ruledOut.push(`image ${c.image} runs with ${m.unlessAllArgs.join(' and ')}: ${m.unlessArgsNote ?? 'not affected'}`);
      otherReason = true;
      continue;
    }
    let note: string;
    if (!m.versions) note = m.versionNote ?? entry.name;
    else if (!v) note = `${entry.name}; version unknown from ${c.tag !== undefined ? `tag ${c.tag}` : 'a digest-pinned reference without tag'}`;
    else note = m.versionNote ?? `${entry.name} ${v.join('.')} ${affectedText(range, entry)}`;
    return { status: 'match', evidence: [`image ${c.image} (${note})`] };
  }
  return ruledOut.length > 0 ? { status: 'ruled-out', evidence: ruledOut, fixed, otherReason } : { status: 'none' };
}

/**
 * The first of `entry.fixUndoneBy` that a candidate container sets: an env var with one of the rule's values
 * (case-insensitive), or a flag given as `--flag=value` or as `--flag value`. Settings of every container of the
 * component's pods count (the setting may sit on a sibling container, e.g. calico-node beside install-cni).
 */
function undoingSetting(
  entry: CatalogEntry,
  candidates: Candidate[],
): { rule: NonNullable<CatalogEntry['fixUndoneBy']>[number]; setting: string; where: string } | undefined {
  for (const rule of entry.fixUndoneBy ?? []) {
    const values = rule.values.map((v) => v.toLowerCase());
    for (const c of candidates) {
      if (rule.env !== undefined) {
        const v = c.env[rule.env];
        if (v !== undefined && values.includes(v.toLowerCase())) return { rule, setting: `${rule.env}=${v}`, where: c.image };
      }
      if (rule.arg !== undefined) {
        const argv = [...c.command, ...c.args];
        for (let i = 0; i < argv.length; i++) {
          const a = argv[i]!;
          const v = a.startsWith(`${rule.arg}=`) ? a.slice(rule.arg.length + 1) : a === rule.arg ? argv[i + 1] : undefined;
          if (v !== undefined && values.includes(v.toLowerCase())) return { rule, setting: `${rule.arg}=${v}`, where: c.image };
        }
      }
    }
  }
  return undefined;
}

/** Stage 1b: pod labels that identify the component (e.g. Spark's `spark-role`), for images built by users. */
function matchLabels(entry: CatalogEntry, ctx: Context): EntryResult {
  const keys = entry.match.podLabels;
  if (!keys || !ctx.state) return { status: 'none' };
  const pods = ctx.tokenPods.length > 0 ? ctx.tokenPods : ctx.stateKnown ? ctx.state.pods : [];
  for (const p of pods) {
    const key = keys.find((k) => p.labels[k] !== undefined);
    if (key === undefined) continue;
    const version = entry.match.versions
      ? `; version unknown from the labels (affected: ${entry.match.versions.map(rangeText).join(' or ')}; fixed in ${entry.fixedIn ?? '—'})`
      : '';
    return { status: 'match', evidence: [`pod ${p.name} is labelled ${key}=${p.labels[key]} (${entry.name})${version}`] };
  }
  return { status: 'none' };
}

/**
 * Stage 2: user-agent prefixes. `explained` holds prefixes of entries whose image stage recognised
 * the component and ruled it out: a user agent starting with one of them belongs to that component.
 */
function matchUserAgents(entry: CatalogEntry, ctx: Context, explained: string[], catalog: CauseCatalog): EntryResult {
  const m = entry.match;
  if (!m.userAgents) return { status: 'none' };
  const ruledOut: string[] = [];
  const fixed: string[] = [];
  for (const ua of ctx.userAgents) {
    const lower = ua.toLowerCase();
    const prefix = m.userAgents.find((p) => lower.startsWith(p.toLowerCase()));
    if (prefix === undefined) continue;
    if (explained.some((p) => lower.startsWith(p.toLowerCase()))) continue;
    const reading = m.userAgentVersion ? readUserAgent(entry, ua) : undefined;
    if (reading === 'other') continue; // same prefix, another client
    if (reading !== undefined && reading !== 'no-version') {
      const { v, range } = reading;
      if (m.versions && !range) {
        ruledOut.push(`user agent "${ua}": version ${v.join('.')} is outside the affected versions of ${entry.name}`);
        fixed.push(
          `user agent "${ua}": ${entry.name} ${v.join('.')} re-reads the token file itself (fixed in ${entry.fixedIn ?? 'this version'}), yet this application presents a stale token: it keeps a token of its own (e.g. reads the token file once into its client configuration, or builds its client once with that token)`,
        );
        continue;
      }
      const note = `${entry.name} ${v.join('.')} ${affectedText(range, entry)}`;
      const amb = ambiguousReading(entry, ua, catalog);
      return {
        status: 'match',
        evidence: [`user agent "${ua}" (${note})`, ...amb.evidence],
        ...(amb.fix !== undefined ? { fix: amb.fix, sources: amb.sources ?? [] } : {}),
      };
    }
    const unknownVersion = m.versions
      ? ctx.stateKnown
        ? '; version unknown: no matching container image in cluster state'
        : '; version unknown: no cluster state'
      : '';
    return { status: 'match', evidence: [`user agent "${ua}" identifies ${m.versions ? unversionedName(entry) : entry.name}${unknownVersion}`] };
  }
  return ruledOut.length > 0 ? { status: 'ruled-out', evidence: ruledOut, fixed } : { status: 'none' };
}

/**
 * The library version an entry's `userAgentVersion` (case-insensitive) reads from a user agent, with the affected
 * range it falls in; `no-version` when the user agent carries no version at all after the prefix (`Fluent-Bit`), so
 * the entry still applies with the version unknown; `other` when it carries one the regex does not read (same
 * prefix, another client: `OpenAPI-Generator/6.0.0/java`).
 */
function readUserAgent(
  entry: CatalogEntry,
  ua: string,
): { v: number[]; range: ReturnType<typeof rangeOf> } | 'no-version' | 'other' {
  const vm = new RegExp(entry.match.userAgentVersion!, 'i').exec(ua);
  const v = vm?.[1] !== undefined ? parseVersion(vm[1]) : undefined;
  if (!v) {
    const prefix = entry.match.userAgents?.find((p) => ua.toLowerCase().startsWith(p.toLowerCase())) ?? '';
    return /\d/.test(ua.slice(prefix.length)) ? 'other' : 'no-version';
  }
  return { v, range: entry.match.versions ? rangeOf(v, entry.match.versions) : undefined };
}

/**
 * When entries of other components read the same user agent with their own `userAgentVersion` (the Kubernetes Python
 * client and kubernetes_asyncio both send `OpenAPI-Generator/<version>/python`), the user agent alone cannot tell
 * which library it is: the evidence says so, with the verdict for each reading, and the fix names every fix
 * (`entry`'s, which matched, first). Nothing when no other entry reads it.
 */
function ambiguousReading(entry: CatalogEntry, ua: string, catalog: CauseCatalog): { evidence: string[]; fix?: string; sources?: string[] } {
  const evidence: string[] = [];
  const fixes: string[] = [];
  const sources: string[] = [];
  for (const e of catalog.entries) {
    if (e.component === entry.component || !e.match.userAgentVersion || !e.match.userAgents?.some((p) => ua.toLowerCase().startsWith(p.toLowerCase()))) continue;
    const r = readUserAgent(e, ua);
    if (r === 'other' || r === 'no-version') continue;
    const affected = !e.match.versions || r.range !== undefined;
    evidence.push(
      affected
        ? `ambiguous: user agent "${ua}" is also what ${e.name} ${r.v.join('.')} sends, which is affected too (${affectedText(r.range, e)})`
        : `ambiguous: affected if this is ${entry.name}; user agent "${ua}" is also what ${e.name} ${r.v.join('.')} sends, which is outside its affected versions (fixed in ${e.fixedIn ?? 'this version'})`,
    );
    fixes.push(affected ? `If it is ${e.name}: ${e.fix}` : `If it is ${e.name} (fixed in ${e.fixedIn ?? 'this version'}): ${OWN_TOKEN_FIX}`);
    sources.push(...e.sources);
  }
  if (fixes.length === 0) return { evidence };
  return { evidence, fix: [`If it is ${entry.name}: ${entry.fix}`, ...fixes].join(' '), sources };
}

/** Stage 3: the ServiceAccount, only when cluster state shows no image at all. */
/**
 * An entry's name without the version range it claims (`Multus CNI thin plugin (v3 and older)` → `Multus CNI thin
 * plugin`, `… v4` → `…`): what a match says when no image tells the version, so a v4 client is never called "v3 and
 * older" from its user agent or ServiceAccount alone.
 */
function unversionedName(entry: CatalogEntry): string {
  return entry.name.replace(/\s*\([^)]*\)\s*$/, '').replace(/\s+v\d[\w.]*$/, '');
}

function matchServiceAccount(entry: CatalogEntry, ctx: Context): EntryResult {
  const sa = ctx.serviceAccount;
  if (!entry.match.serviceAccounts || ctx.candidates.length > 0 || !sa) return { status: 'none' };
  const hit = entry.match.serviceAccounts.some(
    (s) => s.name === sa.name && (s.namespace === undefined || s.namespace === sa.namespace),
  );
  if (!hit) return { status: 'none' };
  return {
    status: 'match',
    evidence: [`ServiceAccount ${sa.namespace}/${sa.name} is the one ${entry.match.versions ? unversionedName(entry) : entry.name} uses (no container image known to confirm)`],
  };
}

/**
 * Real evidence that a stale token is presented from outside its pod (e.g. a copy in a kubeconfig on the host):
 * - 401s attributed to this client (same source IP and user agent as the token's stale uses) after the token's pod
 *   was replaced: deleting a pod invalidates its bound tokens (they carry the pod uid; kubernetes
 *   `pkg/serviceaccount/claims.go` checks it), so a process in that pod cannot be the one still presenting it;
 * - a token of a running pod (same uid) used from a source IP that is neither the pod's IP nor its node's, when other
 *   tokens of this finding do come from their pods' IPs (so source IPs are pod IPs here, not a NAT gateway's).
 * A token of an earlier pod used *before* its replacement started is not such evidence: that is what a client that
 * caches its token looks like just before a restart (see {@link replacedPodEvidence}).
 */
function outsidePodEvidence(ctx: Context): string[] {
  if (!ctx.stateKnown || !ctx.state) return [];
  const out: string[] = [];
  for (const r of ctx.stale) {
    if (r.pod === undefined || ctx.state.pods.some((p) => sameTokenPod(r, p))) continue;
    const replacement = successorPod(r, ctx.state.pods);
    if (replacement?.startTime === undefined) continue;
    const start = replacement.startTime;
    const after = ctx.unauthorized.filter(
      (u) => u.lastSeen > start && u.sourceIPs.some((ip) => r.sourceIPs.includes(ip)) && (u.userAgents.length === 0 || u.userAgents.some((ua) => r.userAgents.includes(ua))),
    );
    if (after.length === 0) continue;
    const n = after.reduce((sum, u) => sum + u.requests, 0);
    const last = after.reduce((m, u) => Math.max(m, u.lastSeen), -Infinity);
    out.push(
      `${n} request${n === 1 ? '' : 's'} rejected with 401 up to ${iso(last)}, after pod ${r.pod} was replaced (its successor ${replacement.name} started ${iso(start)}), from the source IP and user agent of its stale uses: something outside the pod still presents the pod's invalidated token (e.g. a copy on the host)`,
    );
  }
  const own = (r: TokenRecord, p: PodInfo): boolean => {
    const ips = new Set([...(p.ips ?? []), ...(p.hostIP ? [p.hostIP] : [])]);
    return r.sourceIPs.some((ip) => ips.has(ip));
  };
  const pairs: { r: TokenRecord; p: PodInfo }[] = [];
  for (const r of ctx.stale) {
    const p = r.podUid ? ctx.state.pods.find((x) => x.uid === r.podUid) : undefined;
    if (p && ((p.ips?.length ?? 0) > 0 || p.hostIP) && r.sourceIPs.length > 0) pairs.push({ r, p });
  }
  if (pairs.some(({ r, p }) => own(r, p))) {
    for (const { r, p } of pairs) {
      if (own(r, p)) continue;
      out.push(
        `token of pod ${p.name} used from source IP ${r.sourceIPs.join(', ')}, which is neither the pod's IP (${(p.ips ?? []).join(', ') || 'unknown'}) nor its node's (${p.hostIP ?? 'unknown'}), while other tokens here come from their own pods' IPs: the token is presented from elsewhere (e.g. a copy on another host)`,
      );
    }
  }
  return out;
}

/**
 * How long an old pod may keep working after its replacement started (a rolling update with surge stops the old pod
 * only once the new one is ready).
 */
const REPLACEMENT_OVERLAP_MS = 10 * MINUTE_MS;

/**
 * Tokens of pods that are gone and whose successor ({@link successorPod}) started about when the token was last used: the uses are
 * from before a restart, and deleting a pod invalidates its tokens (they are bound to its uid).
 */
function replacedPodEvidence(ctx: Context): string[] {
  if (!ctx.stateKnown || !ctx.state) return [];
  const replaced: string[] = [];
  let latestStart = -Infinity;
  for (const r of ctx.stale) {
    if (r.pod === undefined || ctx.state.pods.some((p) => sameTokenPod(r, p))) continue;
    const next = successorPod(r, ctx.state.pods);
    if (next?.startTime === undefined || r.lastSeen > next.startTime + REPLACEMENT_OVERLAP_MS) continue;
    if (!replaced.includes(r.pod)) replaced.push(r.pod);
    latestStart = Math.max(latestStart, next.startTime);
  }
  if (replaced.length === 0) return [];
  replaced.sort();
  return [
    `stale uses came from earlier pods ${replaced.slice(0, 5).join(', ')}${replaced.length > 5 ? ` and ${replaced.length - 5} more` : ''}, each up to its replacement's start (last replacement started ${iso(latestStart)}): deleting a pod invalidates its tokens, so these tokens are dead now; the client read its token once and will go stale again`,
  ];
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

/** At most this many 401 attributions are quoted in a cause's evidence (the overflow line always is). */
export const MAX_ATTRIBUTION_LINES = 10;
/** At most this many evidence lines per cause; the last says how many more there were. */
export const MAX_EVIDENCE_LINES = 25;

function attributionEvidence(ctx: Context): string[] {
  const recs = ctx.records.filter((r) => r.kind === 'unauthorized' && r.attribution);
  const overflow = recs.filter((r) => r.overflow).map((r) => r.attribution!);
  const lines = dedupe(recs.filter((r) => !r.overflow).map((r) => r.attribution!));
  if (lines.length <= MAX_ATTRIBUTION_LINES) return [...overflow, ...lines];
  const more = lines.length - MAX_ATTRIBUTION_LINES;
  return [...overflow, ...lines.slice(0, MAX_ATTRIBUTION_LINES), `… and ${more} more source${more === 1 ? '' : 's'} attributed the same way`];
}

/** `xs` without duplicates, at most {@link MAX_EVIDENCE_LINES} long (the last line then counts the rest). */
function cappedEvidence(xs: string[]): string[] {
  const d = dedupe(xs);
  if (d.length <= MAX_EVIDENCE_LINES) return d;
  const more = d.length - (MAX_EVIDENCE_LINES - 1);
  return [...d.slice(0, MAX_EVIDENCE_LINES - 1), `… and ${more} more`];
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
  const invalidated: { name: string; namespace: string }[] = [];
  for (const r of legacy) {
    if (r.attribution) evidence.push(r.attribution);
    const s = r.legacySecret;
    if (!s) {
      evidence.push(
        `legacy (Secret-based) token used ${r.requests} times, last at ${iso(r.lastSeen)}; the audit events do not name the Secret (API server before 1.29)`,
      );
      continue;
    }
    const ns = s.namespace ?? r.namespace;
    const info = ctx.stateKnown ? ctx.state?.legacySecrets.find((x) => x.name === s.name && x.namespace === ns) : undefined;
    if (s.kind === 'invalidated' || info?.invalidSince) invalidated.push({ name: s.name, namespace: ns });
    const how =
      s.kind === 'invalidated'
        ? `invalidated (annotation authentication.k8s.io/legacy-token-invalidated): ${r.requests} request${r.requests === 1 ? '' : 's'} rejected with 401`
        : `${s.kind} (annotation authentication.k8s.io/legacy-token-${s.kind}-secret), used ${r.requests} times`;
    evidence.push(`Secret ${ns}/${s.name}: legacy token ${how}, last at ${iso(r.lastSeen)}`);
    if (info?.lastUsed) evidence.push(`Secret ${ns}/${s.name} label kubernetes.io/legacy-token-last-used: ${info.lastUsed}`);
    if (info?.invalidSince) evidence.push(`Secret ${ns}/${s.name} label kubernetes.io/legacy-token-invalid-since: ${info.invalidSince}`);
    if (!info && s.kind === 'invalidated') {
      evidence.push(`Secret ${ns}/${s.name}: labels unknown (${ctx.stateKnown ? 'no Secret metadata in cluster state' : 'no cluster state'})`);
    }
    if (r.sourceIPs.length > 0) evidence.push(`requests came from source IP ${r.sourceIPs.slice(0, 5).join(', ')}`);
  }
  evidence.push(...clientEvidence(ctx));
  const moveFix =
    'Move the client to a bound token (the default kube-api-access projected volume, or a serviceAccountToken projection read from the file at use time; outside the cluster, `kubectl create token <serviceaccount>` issues a bound token with an expiry), then delete the Secret.';
  if (invalidated.length > 0) {
    const labelCmds = invalidated
      .slice(0, 3)
      .map((x) => `kubectl label secret ${x.name} -n ${x.namespace} kubernetes.io/legacy-token-invalid-since-`)
      .join('; ');
    return {
      id: 'legacy-secret-token',
      component: null,
      summary:
        'The client still authenticates with an auto-generated legacy Secret token that the API server invalidated (LegacyServiceAccountTokenCleanUp, Kubernetes 1.29+: unused for the clean-up period, labelled kubernetes.io/legacy-token-invalid-since), so its requests fail with 401.',
      fix: `To get the client working again for now, re-enable the token by removing the label (${labelCmds}); the cleaner invalidates it again, and later deletes it, once it is unused for the clean-up period. ${moveFix}`,
      evidence: cappedEvidence(evidence),
      sources: [K8S_SA_ADMIN_DOC, KEP_2799],
    };
  }
  return {
    id: 'legacy-secret-token',
    component: null,
    summary:
      'The client authenticates with a long-lived legacy token from a kubernetes.io/service-account-token Secret instead of a bound, rotating projected token.',
    fix: `${moveFix} Kubernetes 1.30+ (LegacyServiceAccountTokenCleanUp) invalidates auto-generated legacy tokens left unused.`,
    evidence: cappedEvidence(evidence),
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
