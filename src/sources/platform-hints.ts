/**
 * What the records of an audit export say about how the platform exports it — whether the export can see most
 * stale-token requests at all — and the words both `scan` and `serve` use when it cannot:
 * - AKS: a diagnostic setting that exports only the `kube-audit-admin` category leaves out get and list requests,
 *   where most stale-token uses are (https://learn.microsoft.com/azure/aks/monitor-aks-reference, resource logs:
 *   `kube-audit` is every audit event, `kube-audit-admin` excludes get and list);
 * - GKE: reads (get, list, watch) are logged only as Data Access audit entries, which are off by default; Admin
 *   Activity entries alone cannot see them (https://cloud.google.com/kubernetes-engine/docs/how-to/audit-logging).
 *
 * The markers are looked for as text in each record (a few `indexOf` per line, before any JSON parsing): the AKS
 * category as a JSON string value (`"kube-audit"`, `"kube-audit-admin"`), the GKE log name as Cloud Logging writes it,
 * URL-encoded (`cloudaudit.googleapis.com%2Factivity`, `…%2Fdata_access`).
 */

/** The platform markers seen in some records. */
export interface PlatformHints {
  /** AKS diagnostic categories seen: `kube-audit`, `kube-audit-admin`. */
  aksCategories: Set<string>;
  /** GKE audit log names seen: `activity`, `data_access`. */
  gkeLogs: Set<string>;
}

/** A fresh, empty {@link PlatformHints}. */
export function createPlatformHints(): PlatformHints {
  return { aksCategories: new Set(), gkeLogs: new Set() };
}

const AKS_MARK = Buffer.from('kube-audit');
const GKE_MARK = Buffer.from('cloudaudit.googleapis.com%2F');

/**
 * Whether a record comes from an AKS or GKE export at all: every AKS diagnostic record carries its `category` and
 * every GKE `LogEntry` its `logName`, so a reader can decide from a file's first record and skip the per-record
 * markers for a plain kube-apiserver log.
 */
export function isPlatformExport(record: Buffer): boolean {
  return record.includes(AKS_MARK) || record.includes(GKE_MARK);
}

/** Adds the markers of one record (a line or a file's head, as bytes) to `hints`. Cheap on plain audit lines: two scans. */
export function tallyPlatformHints(record: Buffer, hints: PlatformHints): void {
  if (record.includes(AKS_MARK)) {
    if (record.includes('"kube-audit-admin"')) hints.aksCategories.add('kube-audit-admin');
    if (record.includes('"kube-audit"')) hints.aksCategories.add('kube-audit');
  }
  if (record.includes(GKE_MARK)) {
    if (record.includes('cloudaudit.googleapis.com%2Factivity')) hints.gkeLogs.add('activity');
    if (record.includes('cloudaudit.googleapis.com%2Fdata_access')) hints.gkeLogs.add('data_access');
  }
}

/** Whether an export with these categories is AKS `kube-audit-admin` only. */
export function aksAdminOnly(aksCategories: ReadonlySet<string>): boolean {
  return aksCategories.has('kube-audit-admin') && !aksCategories.has('kube-audit');
}

/** Whether an export with these log names is GKE Admin Activity without Data Access. */
export function gkeWithoutDataAccess(gkeLogs: ReadonlySet<string>): boolean {
  return gkeLogs.has('activity') && !gkeLogs.has('data_access');
}

/** Why an AKS `kube-audit-admin`-only export is blind, and the fix. */
export const AKS_ADMIN_ONLY_TEXT =
  "only the AKS kube-audit-admin category is exported; it leaves out get and list requests, where most stale-token uses are: enable the kube-audit category in the cluster's diagnostic setting";

/** Why an AKS cluster read from Log Analytics (`audit.azure`) with `AKSAuditAdmin` rows but no `AKSAudit` rows is blind, and the fix. */
export const AKS_ADMIN_ONLY_LOG_ANALYTICS_TEXT =
  "the workspace holds only AKSAuditAdmin rows (the kube-audit-admin category) for this cluster; they leave out get and list requests, where most stale-token uses are: add the kube-audit category to the cluster's diagnostic setting in resource-specific mode (the AKSAudit table), and give tokenwatch's identity the Log Analytics Reader role on the workspace";

/** Why a GKE export without Data Access entries is blind, and the fix. */
export const GKE_NO_DATA_ACCESS_TEXT =
  'GKE Admin Activity audit entries but no Data Access entries: reads (get, list, watch), where most stale-token uses are, are logged only as Data Access; enable Data Access audit logs for the Kubernetes Engine API (https://cloud.google.com/logging/docs/audit/configure-data-access), include them in the export, and give the reader roles/logging.privateLogViewer (Data Access entries are private logs)';
