/**
 * Renders examples/README.md from the expected results and the model, so the numbers in it are the numbers in
 * the data (the README is regenerated and byte-compared with the other files).
 */
import { gunzipSync } from 'node:zlib';
import type { ExpectedExamples, ExpectedFinding, ExpectedInput, TokenFacts } from './expected.js';
import type { ClusterModel } from './model.js';
import { IMAGES, REFERENCE_TIME, ROTATION_TIME, UA } from './model.js';
import type { RenderedEvent } from './events.js';

const FILE_DESCRIPTIONS = (): Array<[string, string]> => [
  ['audit/kube-apiserver-audit.log', 'Current API-server audit log (`--audit-log-path`): audit.k8s.io/v1 Event JSON lines, 2026-11-19T06:00Z → 2026-11-20T12:00Z, with 2 malformed lines'],
  ['audit/kube-apiserver-audit-2026-11-19T06-00-00.000.log.gz', 'The previous file, rotated and gzip-compressed at 2026-11-19T06:00Z (lumberjack backup name), 2026-11-18T12:00Z → 06:00Z'],
  ['cluster-snapshot.json', '`kubectl get pods,daemonsets,deployments,statefulsets,replicasets,jobs,cronjobs,serviceaccounts,secrets -A -o json` at the reference time (a `v1 List`)'],
  ['cloudwatch/filter-log-events.json', `\`aws logs filter-log-events --log-group-name /aws/eks/prod-eks/cluster --log-stream-name-prefix kube-apiserver-audit --filter-pattern '"system:serviceaccount:kube-system:multus, seconds after warning threshold"' --start-time ${ROTATION_TIME} --end-time ${REFERENCE_TIME + 1}\` output (4-space JSON)`],
  ['insights/stale-tokens.csv', 'Logs Insights console export (CSV) of `fields @timestamp, @message \\| filter @logStream like /kube-apiserver-audit/ \\| filter @message like /seconds after warning threshold/ \\| sort @timestamp desc`, last 12 hours'],
  ['insights/stale-tokens.json', 'The same Logs Insights result exported as JSON'],
  ['expected.json', 'What tokenwatch should find in each input (typed as `ExpectedExamples` in `generator/expected.ts`); tests assert against it'],
  ['README.md', 'This file'],
];

function kb(n: number): string {
  return n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(2)} MB` : `${Math.round(n / 1024)} KB`;
}

function day(isoTime: string): string {
  return isoTime.replace('.000Z', 'Z').replace(/\.\d{3}Z$/, 'Z');
}

function tokenRow(t: TokenFacts, label: string, state: string): string {
  return `| ${label} | \`${t.node}\` | \`${t.pod}\`${t.podInSnapshot ? '' : ' (gone)'} | ${day(t.issuedAt)} | ${day(t.warnAfter)} | ${day(t.rejectionAt)} | ${state} |`;
}

function findingRow(f: ExpectedFinding): string {
  const rejection = f.rejectionAt ? `${day(f.rejectionAt)} (${f.daysLeft} d)` : '—';
  const tokens = f.kind === 'stale-token' ? String(f.tokens.length) : '—';
  return `| \`${f.namespace}/${f.serviceAccount}\` | ${f.kind} | **${f.severity}** | ${f.requests} | ${tokens} | ${rejection} | ${f.component ?? '—'} |`;
}

function inputSection(name: string, input: ExpectedInput): string[] {
  const s = input.stats;
  return [
    `### \`${name}\` — ${input.description}`,
    '',
    `Files: ${input.files.map((f) => `\`${f}\``).join(', ')}. Reference time (latest event): ${day(input.referenceTime)}.`,
    `${s.lines} lines/records, ${s.auditEvents} audit events, ${s.malformed} malformed (${s.malformedWithTokenTerm} of them with a token-use term), ` +
      `${s.tokenUseEvents} token-use events = **${s.tokenUses} token uses** counted once + ${s.duplicates} further stages of the same requests.`,
    '',
    '| ServiceAccount | kind | severity | requests | tokens | rejection (EKS) | component |',
    '|---|---|---|---|---|---|---|',
    ...input.findings.map(findingRow),
    '',
  ];
}

/** The README text. */
export function renderReadme(
  expected: ExpectedExamples,
  _model: ClusterModel,
  files: Map<string, Buffer>,
  counts: { current: number; rotated: number; events: readonly RenderedEvent[] },
): string {
  const all = expected.inputs['audit-all'];
  if (!all) throw new Error('no audit-all input');
  const st = expected.story;
  const byPod = new Map(expected.tokens.map((t) => [t.pod, t]));
  const nodeRows: string[] = [];
  const states: Record<string, string> = {
    A: 'pod running since then; token copied once into the host kubeconfig',
    B: 'same',
    C: 'same',
    D: 'node joined 12 days ago; pod (and token) younger',
    E: `token rejected since ${day(st.multusRejectedToken.rejectedAt)}: CNI ADD gets 401`,
  };
  for (const n of st.nodes) {
    if (n.label === 'F') continue;
    const t = byPod.get(n.multusPod);
    if (t) nodeRows.push(tokenRow(t, n.label, states[n.label] ?? ''));
  }
  const replaced = byPod.get(st.multusReplacedPod.name);
  if (replaced) nodeRows.push(tokenRow(replaced, 'F', `pod deleted ${day(st.multusReplacedPod.deletedAt)}; replaced by \`${st.multusReplacedPod.replacedBy}\` (fresh token)`));
  const flux = expected.tokens.find((t) => t.subject.endsWith(':helm-controller'));
  const fb = expected.tokens.filter((t) => t.subject.endsWith(':fluent-bit'));
  const multusAll = all.findings.find((f) => f.kind === 'stale-token' && f.serviceAccount === 'multus');
  const u401 = all.findings.find((f) => f.kind === 'unauthorized');
  const legacy = all.findings.find((f) => f.kind === 'legacy-token');
  const totalBytes = [...files.values()].reduce((a, b) => a + b.length, 0);
  const rotatedBytes = gunzipSync(files.get('audit/kube-apiserver-audit-2026-11-19T06-00-00.000.log.gz') ?? Buffer.alloc(0)).length;
  const tokenLines = counts.events.filter((e) => e.req.signal).length;
  const share = (100 * (1 - tokenLines / (counts.current + counts.rotated))).toFixed(1);

  const lines: string[] = [
    '# Example data',
    '',
    '<!-- Generated by `npx tsx examples/generate.ts`. Do not edit: change the generator and regenerate. -->',
    '',
    'Realistic inputs for `tokenwatch scan` (`npm run demo`), the tests and sandbox replays: the audit logs of one',
    `EKS 1.31 cluster, **\`${expected.cluster}\`** in us-west-2 (6 worker nodes), the same events as CloudWatch Logs returns them, and a`,
    'snapshot of the cluster. Everything is produced by a deterministic generator (seeded PRNG, fixed reference time,',
    'no clock): `npx tsx examples/generate.ts` rewrites these files byte for byte (`test/examples/` checks it).',
    '',
    `**Reference time: ${day(expected.referenceTime)}** — the latest event time in the logs (a request still in flight when`,
    'the log was copied). Severities below are computed as of that time with `--max-token-age eks` (reject',
    `${expected.eksMaxSecondsAfterWarning.toLocaleString('en-US')} s = 90 days after the token's \`warnafter\`), critical < ${expected.severityThresholdDays.critical} days or 401s, warning < ${expected.severityThresholdDays.warning} days.`,
    '',
    '## Files',
    '',
    '| file | what | size |',
    '|---|---|---|',
    ...FILE_DESCRIPTIONS().map(([f, what]) => {
      const size = f === 'README.md' ? '—' : kb(files.get(f)?.length ?? 0);
      const extra = f.endsWith('.gz') ? ` (${kb(rotatedBytes)} uncompressed)` : '';
      return `| \`${f}\` | ${what} | ${size}${extra} |`;
    }),
    '',
    `Data files total ${kb(totalBytes)}. \`serve.yaml\` belongs to the \`tokenwatch serve\` demo, not to this generator.`,
    '',
    '```sh',
    'npm run demo                               # scan both audit files with the snapshot (table)',
    'node bin/tokenwatch.js scan --cluster prod-eks --format json \\',
    '  --audit-log examples/audit/* --cluster-snapshot examples/cluster-snapshot.json',
    'node bin/tokenwatch.js scan --audit-log examples/cloudwatch/filter-log-events.json --cluster prod-eks',
    'node bin/tokenwatch.js scan --audit-log examples/insights/stale-tokens.csv --cluster prod-eks',
    'npx tsx examples/generate.ts [OUT_DIR]     # regenerate (default: examples/)',
    '```',
    '',
    '## The cluster and its traffic',
    '',
    `The logs hold ${counts.current} + ${counts.rotated} lines. ${share} % of them are ordinary traffic: kubelet lease and node-status`,
    'updates (EKS IAM identities), controller-manager and scheduler leader election, controllers acting with their own',
    'ServiceAccounts, CoreDNS watches with kubelet TokenRequests (`authentication.kubernetes.io/issued-credential-id`) and',
    'fresh bound tokens, kube-proxy and aws-node watches, Flux, a `shop/cart-cleanup` CronJob every 4 hours (job, pod,',
    'binding, CNI ADD/DEL through Multus, TTL clean-up), EKS metrics scrapes. A real cluster writes thousands of events a',
    'minute; the example keeps a thin but faithful sample. Requests log `RequestReceived` + `ResponseComplete` (watches',
    'also `ResponseStarted`) with the same `auditID`: **count each request once**. Requests whose later stages fall after',
    'the rotation or after the cut are split across files or incomplete, as in real logs.',
    '',
    '## Stories',
    '',
    '### 1. Multus CNI on EKS (the main story)',
    '',
    `DaemonSet \`kube-system/kube-multus-ds\`, ServiceAccount \`kube-system/multus\`, thin-plugin image \`${IMAGES.multus}\``,
    '(manifest of `aws/amazon-vpc-cni-k8s` `config/multus/v3.7.2-eksbuild.1`). Its entrypoint copies the pod\'s token once into',
    '`/etc/cni/net.d/multus.d/multus.kubeconfig` on the host; the `multus` binary the kubelet runs for every CNI ADD/DEL',
    `presents that token (user agent \`${UA.multus}\`, source IP = node IP): GET the pod, update \`pods/status\`.`,
    'The kubelet keeps rotating the projected token in the pod; the file never changes, so the token goes stale.',
    '',
    '| node | name | Multus pod whose token is presented | issued | warnafter | EKS rejection | state |',
    '|---|---|---|---|---|---|---|',
    ...nodeRows,
    '',
    `- **Replaced pod (node F)**: \`${st.multusReplacedPod.name}\` is named by stale-token events (user.extra pod-name/pod-uid) but is`,
    `  absent from the snapshot: the operator deleted it at ${day(st.multusReplacedPod.deletedAt)} and the DaemonSet created`,
    `  \`${st.multusReplacedPod.replacedBy}\`, whose entrypoint rewrote the kubeconfig; a manual run of the CronJob on node F at 11:40Z`,
    '  then shows Multus with a fresh token (no annotation). A token outliving the pod it names, presented from the node',
    '  by the `multus` binary, is the static-token-file signature. (The API server rejects a token once its bound pod is gone',
    '  — "service account token has been invalidated" — so the old token\'s last accepted use precedes the deletion.)',
    `- Expected (both files): **${multusAll?.severity}**, ${multusAll?.requests} requests over ${multusAll?.tokens.length} tokens, rejection ${multusAll?.rejectionAt ? day(multusAll.rejectionAt) : '—'} (${multusAll?.daysLeft} days),` +
      ` missing pod ${multusAll?.missingPods.map((p) => `\`${p}\``).join(', ')}, component \`multus-thin\`.`,
    '',
    '### 2. Node E: the token crossed the EKS limit — 401s',
    '',
    `Node E (\`${st.multusRejectedToken.node}\`, older \`ng-batch\` node group) still runs \`${st.multusRejectedToken.pod}\`, started 2026-08-22.`,
    `Its token's stale-token events (rotated file and early current file) show the subject and the seconds climbing towards`,
    `7,776,000; at ${day(st.multusRejectedToken.rejectedAt)} EKS starts rejecting it. At 09:29:58Z the CI pipeline rolls \`shop/checkout\``,
    `(story 5); the new pod \`${st.checkoutStuckPod.name}\` lands on node E and stays \`ContainerCreating\`: every sandbox attempt runs`,
    'CNI ADD, Multus presents the expired token and gets 401. These audit events have an empty `user`, `stage: ResponseStarted`',
    'and `responseStatus: {"metadata":{},"message":"Authentication failed, attempted: bearer","code":401}` — exactly what',
    '`WithFailedAuthenticationAudit` writes (kubernetes `staging/src/k8s.io/apiserver/pkg/endpoints/filters/authn_audit.go`:',
    'it sets only `Message`, the response writer adds `Code`; no `status`/`reason`, no annotations).',
    `${st.multusRejectedToken.count401} such events from ${st.multusRejectedToken.first401.slice(11, 19)}Z to ${st.multusRejectedToken.last401.slice(11, 19)}Z, same source IP and user agent as the earlier`,
    `stale events, so they are attributed to \`system:serviceaccount:kube-system:multus\` (inferred). The Deployment shows`,
    '`ProgressDeadlineExceeded`. Expected: an **unauthorized** finding, **critical**, ' + `${u401?.requests ?? 0} requests.`,
    '',
    '### 3. Flux helm-controller v0.21.0',
    '',
    `Deployment \`flux-system/helm-controller\` (ReplicaSet-owned pod, image \`${IMAGES.helmController}\`). Before v0.22.0 the Helm`,
    'client is built once (fluxcd/helm-controller#479): Helm storage calls (`list secrets` by `name=<release>,owner=helm`) present',
    `the token from pod start (${flux ? day(flux.issuedAt) : ''}, ~45 days stale), while its controller-runtime client (leases, status`,
    `patches) uses fresh tokens — same pod, two credential ids. User agent \`${UA.helmController}\`. The request in flight at the`,
    'reference time is one of these.',
    '',
    '### 4. Fluent Bit 1.8.12',
    '',
    `DaemonSet \`logging/fluent-bit\` (image \`${IMAGES.fluentBit}\`, user agent \`${UA.fluentBit}\`), upgraded by Flux 20 days ago:`,
    `the kubernetes filter reads the token once at start (fixed in 1.9.4), so each of its ${fb.length} pods presents its own ~20-day-old token`,
    '(node D\'s pod is 12 days old) when it fetches metadata of new pods.',
    '',
    '### 5. Legacy Secret token: `ci/deployer`',
    '',
    `A CI pipeline (\`${UA.ciKubectl}\`, 203.0.113.45) authenticates with the manually created Secret \`ci/deployer-token\``,
    '(type `kubernetes.io/service-account-token`, label `kubernetes.io/legacy-token-last-used: 2026-11-20`, fake data). Events carry',
    '`authentication.k8s.io/legacy-token: system:serviceaccount:ci:deployer` and `authentication.k8s.io/legacy-token-manual-secret: deployer-token`',
    `and no pod extras. ${legacy?.requests ?? 0} requests; the last run (\`kubectl set image\`) starts story 2.`,
    '',
    '### 6. Malformed lines',
    '',
    ...expected.malformedLines.map(
      (m) =>
        `- \`${m.file}\` line ${m.line}: ${m.kind === 'truncated' ? 'a Multus stale-token event cut short (invalid JSON; the term `authentication.k8s.io/stale-token` is still on the line; the same request\'s `ResponseComplete` is intact, so it still counts)' : 'a kube-apiserver klog line (`"Unable to authenticate the request" err="[invalid bearer token, service account token has expired]"`) — not JSON'}.`,
    ),
    '',
    'A reader must count and skip both and lose nothing else.',
    '',
    '## Expected findings',
    '',
    'Computed by the generator from what it wrote (`expected.json`, per input, with per-token detail: pod, pod uid, node,',
    'credential id, `warnAfter`, rejection, requests, first/last seen, max seconds after warning). Ground-truth `warnAfter`',
    'values are whole seconds; values inferred from events (`eventTime − secondsAfterWarning`) are 0–5 s later (sub-second',
    'request time, the 10 s authentication cache). Findings are sorted by severity, then rejection time.',
    '',
    ...Object.entries(expected.inputs).flatMap(([name, input]) => inputSection(name, input)),
    '## Fidelity notes',
    '',
    '- Field order, map key order (sorted), `\\u0026` escaping and microsecond timestamps follow Go\'s `encoding/json` and the',
    '  audit.k8s.io/v1 types; RBAC reasons follow `describeSubject` (`ServiceAccount "name/namespace"`); kubelets authenticate',
    '  through aws-iam-authenticator and are authorized by the Node authorizer (empty reason).',
    '- The stale-token value is the Go format `subject: %s, seconds after warning threshold: %d`; within 10 s the API server',
    '  reuses a cached authentication result, so two requests a few ms apart carry the same number.',
    '- The snapshot is sorted by kind (as requested), then namespace/name; keys sorted, 4-space indent, like `kubectl -o json`.',
    '  Every `ownerReference` resolves; every pod\'s ServiceAccount exists. Secret data are readable placeholders.',
    '- The Logs Insights console\'s JSON export format is assumed to be an array of `{"@timestamp","@message"}` rows.',
    '- Account `111122223333`, `ASIAYEXAMPLE…` keys, `AROAYEXAMPLE…` role ids and the 198.51.100.0/24 and 203.0.113.0/24',
    '  addresses are documentation values; no credential in these files is real.',
    '',
  ];
  return lines.join('\n');
}
