/**
 * Pure formatting of a scan report for humans: the table (one row per alert group), fix lines and footer.
 * No I/O and no clock: the reference time is passed in. Colour is decided by the caller
 * (see {@link shouldUseColor}).
 */
import { objectLabel } from '../core/actions.js';
import { createRequire } from 'node:module';
import type TableClass from 'cli-table3';
import { SEVERITY_RANK, type Finding, type ScanReport, type Severity } from '../findings/types.js';
import { DAY_MS, DAY_SECONDS, HOUR_MS } from '../core/units.js';
import { WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS } from '../findings/token-math.js';
import type { Readiness } from '../findings/readiness.js';
import type { NowSource } from '../scan/run.js';
import { FINDING_KIND_ORDER, groupFindings, type FindingGroup } from '../findings/groups.js';
import { escapeControl } from './escape.js';
import { groupedNumber } from '../core/plural.js';


/** True when `severity` is at or above `threshold` (`critical ≥ warning ≥ info`). */
export function atOrAbove(severity: Severity, threshold: Severity): boolean {
  return SEVERITY_RANK[severity] >= SEVERITY_RANK[threshold];
}

/**
 * Whether to colour output written to a stream: only to a TTY, and never when the `NO_COLOR`
 * environment variable is set to a non-empty value (https://no-color.org).
 */
export function shouldUseColor(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  return stream.isTTY === true;
}

/** `YYYY-MM-DD` of an epoch-ms time, UTC. */
export function utcDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** ISO-8601 UTC without milliseconds when they are zero: `2026-11-20T12:00:00Z`. */
export function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.000Z$/, 'Z');
}

/**
 * Time until (or since) a token's rejection, as a short phrase.
 * - future, ≥ 1 day: `in 6 d` (whole days, rounded down: never promises more time than left);
 * - future, < 1 day: `in 5 h` (whole hours, rounded down; `in 0 h` in the last hour);
 * - past or now: `REJECTED 3 d ago` (whole days, rounded down), or `REJECTED 5 h ago` under a day.
 * @param rejectionAt epoch ms UTC
 * @param now reference time, epoch ms UTC
 */
export function formatTimeLeft(rejectionAt: number, now: number): string {
  const delta = rejectionAt - now;
  if (delta > 0) {
    return delta >= DAY_MS ? `in ${Math.floor(delta / DAY_MS)} d` : `in ${Math.floor(delta / HOUR_MS)} h`;
  }
  const ago = -delta;
  return ago >= DAY_MS ? `REJECTED ${Math.floor(ago / DAY_MS)} d ago` : `REJECTED ${Math.floor(ago / HOUR_MS)} h ago`;
}

/**
 * The "rejection" cell: `2026-11-27 (in 6 d)`, `2026-11-17 (REJECTED 3 d ago)`, or `-` when the
 * finding has no rejection time (legacy tokens, 401s).
 * @param rejectionAt ISO-8601 UTC string or null (as in the JSON contract)
 */
export function formatRejection(rejectionAt: string | null, now: number): string {
  if (rejectionAt === null) return '-';
  const at = Date.parse(rejectionAt);
  if (Number.isNaN(at)) return '-';
  return `${utcDate(at)} (${formatTimeLeft(at, now)})`;
}

/**
 * Age in whole days (rounded down) of the oldest token of a finding at `now`, counted from its
 * issue time `warnAfter − 3607 s` (the kubelet requests `expirationSeconds: 3607`, kubernetes
 * `pkg/serviceaccount/claims.go`). Falls back to `maxSecondsAfterWarning + 3607 s` (the age at the
 * last stale request) when no token carries `warnAfter`; undefined for legacy tokens and 401s.
 */
export function oldestTokenAgeDays(finding: Finding, now: number): number | undefined {
  let oldestWarnAfter: number | undefined;
  for (const token of finding.tokens) {
    if (token.warnAfter === null) continue;
    const t = Date.parse(token.warnAfter);
    if (!Number.isNaN(t) && (oldestWarnAfter === undefined || t < oldestWarnAfter)) oldestWarnAfter = t;
  }
  if (oldestWarnAfter !== undefined) {
    return Math.floor((now - oldestWarnAfter + WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS * 1000) / DAY_MS);
  }
  if (finding.maxSecondsAfterWarning !== null) {
    return Math.floor((finding.maxSecondsAfterWarning + WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS) / DAY_SECONDS);
  }
  return undefined;
}

/** How many pod names a table cell lists before `+N more`. */
const MAX_PODS_SHOWN = 3;

/** Pod names, up to {@link MAX_PODS_SHOWN}, then `+N more`; pods absent from cluster state get ` (gone)`. */
function podsCell(finding: Finding): string {
  const pods = finding.pods;
  if (pods.length === 0) return '-';
  const gone = new Set(finding.missingPods ?? []);
  const shown = pods.slice(0, MAX_PODS_SHOWN).map((p) => escapeControl(gone.has(p) ? `${p} (gone)` : p));
  const more = pods.length - shown.length;
  return [...shown, ...(more > 0 ? [`+${more} more`] : [])].join('\n');
}

/** Top-level workloads as `Kind namespace/name`, one a line; `?` when unknown (see the notes under the table). */
function workloadsCell(finding: Finding): string {
  if (finding.workloads.length === 0) return '?';
  return finding.workloads.map((w) => escapeControl(objectLabel(w))).join('\n');
}

/**
 * Why workloads are unknown, for the notes under the table: one line per reason naming the rows (their numbers in
 * the table's `#` column) whose workloads cell (or details) shows `?` — a row of a ServiceAccount none of whose
 * findings names a workload — e.g. `workload ? (row 4): no pod of this ServiceAccount found in cluster state`.
 */
function unknownWorkloadNotes(groups: readonly FindingGroup[]): string[] {
  const rows = new Map<string, number[]>();
  groups.forEach((g, i) => {
    if (groupUnion(g).workloads.length > 0) return;
    const reason = g.members.find((m) => m.clusterState !== undefined)?.clusterState ?? 'no pod of this ServiceAccount found in cluster state';
    rows.set(reason, [...(rows.get(reason) ?? []), i + 1]);
  });
  return [...rows].map(([reason, ns]) => `workload ? (row${ns.length > 1 ? 's' : ''} ${ns.join(', ')}): ${escapeControl(reason)}`);
}

/** Rendering options of {@link renderScanTable}. */
export interface RenderOptions {
  /** Reference time the report was computed at, epoch ms UTC. */
  now: number;
  /** Where `now` came from (for the footer). */
  nowSource: NowSource;
  /** Emit ANSI colour (severity, rejected tokens, header). */
  color: boolean;
  /**
   * Fit the output to this many columns (`scan` passes `process.stdout.columns`, {@link DEFAULT_WIDTH} when not a
   * terminal): a narrow table, with workloads, pods, token age and cause listed under it. Absent: the full table
   * (`scan --wide`), as wide as its cells.
   */
  width?: number;
  /** The readiness verdict, printed as its own section above the footer. */
  readiness?: Readiness;
  /**
   * The API-server metrics (`scan --metrics`) count stale tokens in use: without findings, the headline then says the
   * audit input showed none but the metrics section below does — never a bare "no stale … token use found".
   */
  metricsShowUse?: boolean;
  /**
   * Event times left out as inconsistent (`src/findings/clock-skew.ts`): the footer says how many, from when, and in which
   * file, under the reference-time line.
   */
  ignoredEventTimes?: readonly { time: string; until?: string; count?: number; source?: string }[];
}

/** Heading of the readiness section of the table output. */
export const READINESS_HEADING = 'Is it safe to turn token extension off (--service-account-extend-token-expiration=false)?';

/**
 * The readiness section of the table output: the heading, the verdict's one-line summary and, when not safe, one line
 * per client (ServiceAccount, workloads, last use, and the table row — its alert group — whose fix applies).
 */
export function readinessSection(r: Readiness, findings: readonly Finding[], paint: Paint = (_s, t) => t): string[] {
  const style = r.verdict === 'safe' ? 'bold' : r.verdict === 'not-safe' ? 'red' : 'yellow';
  const lines = [paint('bold', READINESS_HEADING), `  ${paint(style, escapeControl(r.summary))}`];
  // The table numbers its rows per group (one per ServiceAccount): "#N" is the row of the finding's group.
  const groups = groupFindings(findings);
  for (const c of r.clients) {
    const n = groups.findIndex((g) => g.findings.includes(c.findingId));
    const workloads = c.workloads.length > 0 ? c.workloads.map((w) => objectLabel(w)).join(', ') : 'workload unknown';
    lines.push(escapeControl(`  - ${c.namespace}/${c.serviceAccount} (${workloads}): last stale use ${c.lastUse}; fix: ${n >= 0 ? `see #${n + 1} above` : c.fix}`));
  }
  return lines;
}

/** ANSI SGR codes used by the table (open, close). */
const ANSI = {
  red: ['31', '39'],
  yellow: ['33', '39'],
  cyan: ['36', '39'],
  bold: ['1', '22'],
  dim: ['2', '22'],
} as const;
type Style = keyof typeof ANSI;
type Paint = (styles: Style | Style[], text: string) => string;

function ansi(styles: Style | Style[], text: string): string {
  const list = Array.isArray(styles) ? styles : [styles];
  const open = list.map((s) => `\u001b[${ANSI[s][0]}m`).join('');
  const close = list
    .slice()
    .reverse()
    .map((s) => `\u001b[${ANSI[s][1]}m`)
    .join('');
  return `${open}${text}${close}`;
}

function severityWord(severity: Severity, paint: Paint): string {
  switch (severity) {
    case 'critical':
      return paint(['red', 'bold'], severity);
    case 'warning':
      return paint('yellow', severity);
    default:
      return paint('cyan', severity);
  }
}


/** Days before rejection under which a finding is critical by its date alone (docs/design/architecture.md "Terms"). */
const CRITICAL_DAYS = 7;

/**
 * Why a critical finding is critical when its rejection date does not make it so: the API server answered 401 to
 * requests of its ServiceAccount (`buildFindings` raises every finding of a subject with attributed 401s to critical).
 * @returns the number of 401 requests of that ServiceAccount in the report (its `unauthorized` finding), or
 *   undefined when the finding is not critical, or its rejection date alone (under 7 days) explains it.
 */
export function criticalBy401s(f: Finding, findings: readonly Finding[], now: number): number | undefined {
  if (f.severity !== 'critical') return undefined;
  const at = f.rejectionAt === null ? Number.NaN : Date.parse(f.rejectionAt);
  if (!Number.isNaN(at) && at - now < CRITICAL_DAYS * DAY_MS) return undefined;
  const same = findings.filter(
    (g) => g.kind === 'unauthorized' && g.cluster === f.cluster && g.namespace === f.namespace && g.serviceAccount === f.serviceAccount,
  );
  if (same.length === 0) return undefined;
  return same.reduce((n, g) => n + g.requests, 0);
}

function nowLine(now: number, source: NowSource): string {
  const why =
    source === 'option'
      ? 'set with --now'
      : source === 'latest-event'
        ? 'latest event in input; override with --now'
        : 'current time: no event in input; override with --now';
  return `as of ${isoSeconds(now)} (${why})`;
}

/** One footer line per range of event times left out as inconsistent. */
function ignoredLines(ignored: NonNullable<RenderOptions['ignoredEventTimes']>): string[] {
  return ignored.map((t) => {
    const n = t.count ?? 1;
    const range = t.until !== undefined ? `${t.time} to ${t.until}` : t.time;
    return `left out: ${plural(n, 'event time')} ${range}${t.source ? ` (${t.source})` : ''}: inconsistent audit timestamps (a wrong clock?); see warnings`;
  });
}

function plural(n: number, word: string): string {
  return `${groupedNumber(n)} ${word}${n === 1 ? '' : 's'}`;
}

/** The stats footer line, e.g. `read 2 files: 1,234 lines, 1,200 events, 57 token uses, 0 malformed, 3 duplicates`. */
export function statsLine(stats: ScanReport['stats']): string {
  return (
    `read ${plural(stats.files, 'file')}: ${plural(stats.lines, 'line')}, ${plural(stats.events, 'event')}, ` +
    `${plural(stats.tokenUses, 'token use')}, ${groupedNumber(stats.malformed)} malformed, ` +
    `${plural(stats.duplicates, 'duplicate')}`
  );
}

/** Members of a group in the order its kinds are named (the failing signal first). */
function byKind(g: FindingGroup): Finding[] {
  return FINDING_KIND_ORDER.flatMap((k) => g.members.filter((m) => m.kind === k));
}

/** The group's severity cell: its worst severity, with `(401s)` under it when 401s made a member critical (see {@link criticalBy401s}). */
function groupSeverityCell(g: FindingGroup, findings: readonly Finding[], now: number, paint: Paint): string {
  const word = severityWord(g.severity, paint);
  return g.members.some((m) => criticalBy401s(m, findings, now) !== undefined) ? `${word}\n(401s)` : word;
}

/** The group's earliest rejection time (ISO string), or null. */
function groupRejection(g: FindingGroup): string | null {
  const at = g.members.map((m) => m.rejectionAt).filter((r): r is string => r !== null && !Number.isNaN(Date.parse(r)));
  return at.length ? at.reduce((a, b) => (Date.parse(b) < Date.parse(a) ? b : a)) : null;
}

/** One finding standing for the group's union of workloads and pods (the first member's other fields). */
function groupUnion(g: FindingGroup): Finding {
  const seen = new Set<string>();
  const workloads = g.members.flatMap((m) => m.workloads).filter((w) => {
    const k = `${w.kind}/${w.namespace}/${w.name}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  const pods = [...new Set(g.members.flatMap((m) => m.pods))];
  const missingPods = [...new Set(g.members.flatMap((m) => m.missingPods ?? []))];
  const tokens = g.members.flatMap((m) => m.tokens);
  const maxAfter = g.members.map((m) => m.maxSecondsAfterWarning).filter((x): x is number => x !== null);
  const first = g.members[0]!;
  return { ...first, workloads, pods, missingPods, tokens, maxSecondsAfterWarning: maxAfter.length ? Math.max(...maxAfter) : null };
}

/** Fix lines of a group: one per distinct fix, naming the kinds it is for. */
function groupFixes(g: FindingGroup, n: number, paint: Paint): string[] {
  const byFix = new Map<string, string[]>();
  for (const m of byKind(g)) byFix.set(m.cause.fix, [...(byFix.get(m.cause.fix) ?? []), m.kind]);
  return [...byFix].map(([fix, kinds]) => `${paint('bold', `#${n}`)} ${escapeControl(`${g.namespace}/${g.serviceAccount}`)} ${kinds.join(', ')}: fix: ${escapeControl(fix)}`);
}

/** Cause cells of a group: one per distinct cause. */
function groupCauses(g: FindingGroup): string[] {
  return [...new Set(byKind(g).map((m) => (m.cause.component ? `${m.cause.id}\n(${escapeControl(m.cause.component)})` : m.cause.id)))];
}

/**
 * Renders a scan report as the human table: one row per alert group — the findings of one ServiceAccount of one
 * cluster, one root cause (src/findings/groups.ts), in report order (severity then rejection time) — with its kinds
 * and their requests one a line, then its fix lines, then the reference time and read stats. An empty report renders
 * a single "no … found in N events" line plus the footer. Output ends with a newline.
 */
export function renderScanTable(report: ScanReport, opts: RenderOptions): string {
  const paint: Paint = opts.color ? ansi : (_styles, text) => text;
  const footer = [paint('dim', nowLine(opts.now, opts.nowSource)), ...ignoredLines(opts.ignoredEventTimes ?? []).map((l) => paint('dim', l)), paint('dim', statsLine(report.stats))];

  const readiness = opts.readiness ? [...readinessSection(opts.readiness, report.findings, paint), ''] : [];
  if (report.findings.length === 0) {
    const none = `no stale, legacy or unauthorized token use found in ${plural(report.stats.events, 'event')}`;
    return [
      opts.metricsShowUse ? `${none}, but the API-server metrics below count stale tokens in use` : none,
      ...(readiness.length > 0 ? ['', ...readiness] : []),
      ...footer,
      '',
    ].join('\n');
  }

  if (opts.width !== undefined) return renderFitted(report, opts, opts.width, paint, [...readiness, ...footer]);

  const head = [
    '#',
    'cluster',
    'namespace/\nServiceAccount',
    'kind',
    'severity',
    'workload(s)',
    'pods',
    'oldest\ntoken\nage (d)',
    'rejection',
    'requests',
    'cause',
  ];
  // Loaded on first use (~13 ms): `--version`, `--help` and JSON output never need it.
  const Table = createRequire(import.meta.url)('cli-table3') as typeof TableClass;
  const table = new Table({
    head: head.map((h) => paint('bold', h)),
    style: { head: [], border: [] },
  });
  const groups = groupFindings(report.findings);
  groups.forEach((g, i) => {
    const u = groupUnion(g);
    const age = oldestTokenAgeDays(u, opts.now);
    const rejection = formatRejection(groupRejection(g), opts.now);
    table.push([
      String(i + 1),
      escapeControl(g.cluster),
      escapeControl(`${g.namespace}/${g.serviceAccount}`),
      byKind(g).map((m) => m.kind).join('\n'),
      groupSeverityCell(g, report.findings, opts.now, paint),
      workloadsCell(u),
      podsCell(u),
      age === undefined ? '-' : String(age),
      rejection.includes('REJECTED') ? paint('red', rejection) : rejection,
      byKind(g).map((m) => groupedNumber(m.requests)).join('\n'),
      groupCauses(g).join('\n'),
    ]);
  });

  const fixes = groups.flatMap((g, i) => groupFixes(g, i + 1, paint));
  const notes = unknownWorkloadNotes(groups).map((n) => paint('dim', n));
  return [table.toString(), '', ...fixes, '', ...notes, ...readiness, ...footer, ''].join('\n');
}

/** Width `scan` fits its table to when standard output is not a terminal. */
export const DEFAULT_WIDTH = 80;

/**
 * The width `scan` fits its output to: the terminal's (`stream.columns`), else a positive whole `COLUMNS` from the
 * environment (as `ls` reads it), else {@link DEFAULT_WIDTH}.
 */
export function outputWidth(stream: { columns?: number }, env: NodeJS.ProcessEnv): number {
  if (typeof stream.columns === 'number' && stream.columns > 0) return stream.columns;
  const fromEnv = /^\d+$/.test(env.COLUMNS ?? '') ? Number(env.COLUMNS) : 0;
  return fromEnv > 0 ? fromEnv : DEFAULT_WIDTH;
}

/** The narrowest table column {@link renderFitted} shrinks to (border and padding included). */
const MIN_COLUMN = 6;

const SGR = /\u001b\[[0-9;]*m/g;

/** Visible width of a line (ANSI colour codes take no room). */
function visibleLength(line: string): number {
  return line.replace(SGR, '').length;
}

/**
 * Wraps one line to `width` columns at spaces; continuation lines start with `indent` spaces; a word longer than a
 * line is cut. Colour codes stay with their word and take no room.
 */
export function wrapLine(line: string, width: number, indent = 0): string[] {
  if (visibleLength(line) <= width) return [line];
  const lead = /^ */.exec(line)?.[0] ?? '';
  const pad = ' '.repeat(Math.min(indent, Math.max(0, width - 1)));
  const out: string[] = [];
  let current = lead;
  let empty = true;
  const push = (): void => {
    out.push(current);
    current = pad;
    empty = true;
  };
  for (const word of line.slice(lead.length).split(' ')) {
    let w = word;
    const sep = empty ? '' : ' ';
    if (visibleLength(current) + sep.length + visibleLength(w) <= width) {
      current += sep + w;
      empty = false;
      continue;
    }
    if (!empty) push();
    while (visibleLength(current) + visibleLength(w) > width) {
      const room = Math.max(1, width - visibleLength(current));
      const plain = w.replace(SGR, '');
      current += plain.slice(0, room);
      w = plain.slice(room);
      push();
    }
    current += w;
    empty = w === '';
  }
  if (!empty) out.push(current);
  return out;
}

/** Column widths (padding and one border included) that make `natural` fit in `width`: the widest shrinks first. */
function fitColumns(natural: number[], width: number): number[] {
  const cols = [...natural];
  // cli-table3 draws one border per column plus one: a column of colWidth w takes w + 1 characters.
  const total = (): number => cols.reduce((n, w) => n + w + 1, 1);
  while (total() > width) {
    const widest = cols.reduce((best, w, i) => (w > (cols[best] ?? 0) ? i : best), 0);
    if ((cols[widest] ?? 0) <= MIN_COLUMN) break;
    cols[widest] = (cols[widest] ?? 0) - 1;
  }
  return cols;
}

/**
 * The table fitted to `width` columns, one row per alert group: `#`, ServiceAccount, kinds, severity, rejection and
 * requests in the table; per group below it the reason 401s made it critical, workloads, pods, oldest token age,
 * causes and fixes, each line wrapped to `width`. `tail` (readiness section and footer) is wrapped too.
 */
function renderFitted(report: ScanReport, opts: RenderOptions, width: number, paint: Paint, tail: string[]): string {
  const head = ['#', 'namespace/\nServiceAccount', 'kind', 'severity', 'rejection', 'requests'];
  const groups = groupFindings(report.findings);
  const rows = groups.map((g, i) => {
    // Date and time left on two lines: the column stays narrow.
    const rejection = formatRejection(groupRejection(g), opts.now).replace(' (', '\n(');
    return [
      String(i + 1),
      `${escapeControl(g.namespace)}/\n${escapeControl(g.serviceAccount)}`,
      byKind(g).map((m) => m.kind).join('\n'),
      groupSeverityCell(g, report.findings, opts.now, paint),
      rejection.includes('REJECTED') ? paint('red', rejection) : rejection,
      byKind(g).map((m) => groupedNumber(m.requests)).join('\n'),
    ];
  });
  const natural = head.map((h, c) =>
    Math.max(...h.split('\n').map(visibleLength), ...rows.map((r) => Math.max(...(r[c] ?? '').split('\n').map(visibleLength)))) + 2,
  );
  const Table = createRequire(import.meta.url)('cli-table3') as typeof TableClass;
  const table = new Table({
    head: head.map((h) => paint('bold', h)),
    style: { head: [], border: [] },
    colWidths: fitColumns(natural, width),
    wordWrap: true,
  });
  for (const r of rows) table.push(r);

  const details = groups.flatMap((g, i) => {
    const u = groupUnion(g);
    const members = byKind(g);
    const lines = [`${paint('bold', `#${i + 1}`)} ${escapeControl(`${g.namespace}/${g.serviceAccount}`)} ${members.map((m) => m.kind).join(', ')}`];
    const by401 = members.map((m) => criticalBy401s(m, report.findings, opts.now)).find((x) => x !== undefined);
    if (by401 !== undefined) {
      lines.push(`   critical: the API server answered 401 Unauthorized to ${groupedNumber(by401)} request${by401 === 1 ? '' : 's'} of this ServiceAccount`);
    }
    lines.push(`   workloads: ${u.workloads.length > 0 ? u.workloads.map((w) => escapeControl(objectLabel(w))).join(', ') : '? (see the note below)'}`);
    if (u.pods.length > 0) lines.push(`   pods: ${podsCell(u).split('\n').join(', ')}`);
    const age = oldestTokenAgeDays(u, opts.now);
    if (age !== undefined) lines.push(`   oldest token age: ${age} d`);
    const causes = [...new Set(members.map((m) => (m.cause.component ? `${m.cause.id} (${escapeControl(m.cause.component)})` : m.cause.id)))];
    lines.push(`   cause: ${causes.join('; ')}`);
    for (const fix of [...new Set(members.map((m) => m.cause.fix))]) lines.push(`   fix: ${escapeControl(fix)}`);
    return lines.flatMap((l) => wrapLine(l, width, 5));
  });
  const notes = unknownWorkloadNotes(groups).map((n) => paint('dim', n));
  const wrapped = [...notes, ...tail].flatMap((l) => (l === '' ? [''] : wrapLine(l, width, 2)));
  return [table.toString(), '', ...details, '', ...wrapped, ''].join('\n');
}
