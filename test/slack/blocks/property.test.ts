import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Approval } from '../../../src/approvals/machine.js';
import type { Finding } from '../../../src/findings/types.js';
import {
  alertView,
  approvalRequestMessage,
  detailsMessage,
  findingMessage,
  historyMessage,
  mergedAlertMessage,
  OPAQUE_ID_PATTERN,
  recreateConfirmModal,
  renderAlert,
  signalChangeMessage,
  statusMessage,
  validateView,
  verificationMessage,
  type FindingAction,
} from '../../../src/slack/blocks/index.js';
import { validateMessage } from './validate.js';

const alertMessage = (...a: Parameters<typeof alertView>) => renderAlert(alertView(...a));
import { buttonsIn, NOW } from './fixtures.js';

const chars = fc.constantFrom('&', '<', '>', 'a', 'Z', '😀', '`', '*', '\n', ' ', '|', 'é', '-', '/');
/**
 * Strings rich in what breaks Slack text: entities to escape, emoji (surrogate pairs), mrkdwn markers, newlines.
 * fast-check keeps strings small by default, so a third of the values are forced to be huge (≥ maxLength / 2).
 */
const nasty = (maxLength: number) =>
  fc.oneof(
    fc.string({ unit: chars, maxLength: Math.min(20, maxLength) }),
    fc.string({ maxLength: Math.min(20, maxLength) }),
    fc
      .tuple(fc.string({ unit: chars, minLength: 1, maxLength: 24 }), fc.integer({ min: Math.floor(maxLength / 2), max: maxLength }))
      .map(([seed, n]) => seed.repeat(Math.ceil(n / seed.length)).slice(0, n)),
  );
/** Arrays that are small, or huge (≥ maxLength − 100 items, cycling through a few generated ones to stay fast). */
const many = <T>(arb: fc.Arbitrary<T>, maxLength: number) =>
  fc.oneof(
    fc.array(arb, { maxLength: 5 }),
    fc
      .tuple(fc.array(arb, { minLength: 1, maxLength: 4 }), fc.integer({ min: Math.max(0, maxLength - 100), max: maxLength }))
      .map(([seed, n]) => Array.from({ length: n }, (_, i) => seed[i % seed.length]!)),
  );
const name = fc.oneof(fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/), fc.string({ unit: fc.constantFrom('a', 'b', '-', '9'), minLength: 200, maxLength: 253 }).map((s) => `a${s}z`));
const iso = fc.integer({ min: NOW - 400 * 86_400_000, max: NOW + 400 * 86_400_000 }).map((ms) => new Date(ms).toISOString());

const findingArb: fc.Arbitrary<Finding> = fc.record({
  id: fc.string({ minLength: 1, maxLength: 300 }),
  cluster: nasty(400),
  namespace: name,
  serviceAccount: name,
  kind: fc.constantFrom('stale-token', 'legacy-token', 'unauthorized'),
  severity: fc.constantFrom('info', 'warning', 'critical'),
  requests: fc.nat(),
  firstSeen: iso,
  lastSeen: iso,
  maxSecondsAfterWarning: fc.option(fc.nat({ max: 100_000_000 }), { nil: null }),
  rejectionAt: fc.option(iso, { nil: null }),
  tokens: many(
    fc.record({
      pod: fc.option(nasty(300), { nil: null }),
      podUid: fc.option(fc.uuid(), { nil: null }),
      node: fc.option(nasty(300), { nil: null }),
      warnAfter: fc.option(iso, { nil: null }),
      rejectionAt: fc.option(iso, { nil: null }),
      requests: fc.nat(),
      lastSeen: iso,
    }),
    300,
  ),
  pods: many(nasty(300), 500),
  workloads: many(fc.record({ kind: fc.constantFrom('DaemonSet', 'Deployment', 'StatefulSet', 'Job', 'Pod', 'ReplicaSet'), namespace: name, name }), 150),
  userAgents: many(nasty(3000), 120),
  sourceIPs: many(nasty(100), 200),
  cause: fc.record({
    id: fc.constantFrom('static-token-file', 'client-caches-token', 'refresh-on-401', 'legacy-secret-token', 'unknown'),
    component: fc.option(nasty(200), { nil: null }),
    summary: nasty(8000),
    fix: nasty(8000),
    evidence: many(nasty(3000), 150),
    sources: many(fc.oneof(nasty(500), fc.constant('aws/amazon-vpc-cni-k8s#1868'), fc.webUrl()), 120),
  }),
  missingPods: fc.option(many(nasty(300), 500), { nil: undefined }),
  clusterState: fc.option(nasty(3000), { nil: undefined }),
}, { requiredKeys: ['id', 'cluster', 'namespace', 'serviceAccount', 'kind', 'severity', 'requests', 'firstSeen', 'lastSeen', 'maxSecondsAfterWarning', 'rejectionAt', 'tokens', 'pods', 'workloads', 'userAgents', 'sourceIPs', 'cause'] }) as fc.Arbitrary<Finding>;

const hourlyArb = fc.dictionary(
  fc.integer({ min: -30, max: 0 }).map((h) => String(Math.floor(NOW / 3_600_000) * 3_600_000 + h * 3_600_000)),
  fc.nat({ max: 1_000_000 }),
);

describe('builders never break Block Kit limits (property)', () => {
  it('alertMessage (one root cause), its thread replies and the recreate modal: valid for any findings of one ServiceAccount', () => {
    fc.assert(
      fc.property(fc.array(findingArb, { minLength: 1, maxLength: 3 }), fc.boolean(), fc.option(fc.nat({ max: 100_000 }), { nil: undefined }), (raw, resolved, podsTotal) => {
        const first = raw[0]!;
        const members = raw.map((f) => ({ ...f, cluster: first.cluster, namespace: first.namespace, serviceAccount: first.serviceAccount }));
        const restarts = members[0]!.workloads.slice(0, 3).map((workload, i) => ({ workload, id: `opaque_restart_${i}`, buysDays: i === 0 ? 90 : null }));
        const overflow = [
          { action: 'recreate-serviceaccount' as const, label: 'Recreate ServiceAccount…', id: 'opaque_recreate' },
          { action: 'snooze' as const, label: 'Snooze 1 day', id: 'opaque_snooze1' },
          { action: 'snooze' as const, label: 'Snooze 7 days', id: 'opaque_snooze7' },
          { action: 'details' as const, label: 'Details', id: 'opaque_details' },
        ];
        const m = alertMessage(members, resolved ? [] : members, {
          now: NOW,
          restarts,
          overflow,
          ...(podsTotal !== undefined ? { podsTotal } : {}),
          ...(resolved ? { resolved: { at: NOW, note: first.cause.fix } } : {}),
        });
        expect(validateMessage(m)).toEqual([]);
        // Calm: header, impact with fields, fix, at most a context line, the actions.
        expect(m.blocks.length).toBeLessThanOrEqual(5);
        expect(validateMessage(signalChangeMessage(first.cluster, `${first.namespace}/${first.serviceAccount}`, { started: ['unauthorized', 'legacy-token'], stopped: ['stale-token'] }, { requests: { unauthorized: 5 } }))).toEqual([]);
        expect(validateMessage(mergedAlertMessage(first.cluster, `${first.namespace}/${first.serviceAccount}`, 'https://x.slack.com/archives/C1/p1'))).toEqual([]);
        expect(validateView(recreateConfirmModal(first, JSON.stringify({ id: 'opaque_recreate', channel: 'C0OPS00001' }), podsTotal))).toEqual([]);
      }),
      { numRuns: 60, endOnFailure: true },
    );
  });

  it('findingMessage: valid blocks, fallback text, opaque button values only', () => {
    fc.assert(
      fc.property(findingArb, hourlyArb, fc.boolean(), fc.option(fc.nat({ max: 100_000 }), { nil: undefined }), (f, hourly, resolved, podsTotal) => {
        const minted = new Map<string, FindingAction>();
        const buttonsFor = (a: FindingAction): string => {
          const id = `opaque_${minted.size.toString(36).padStart(6, '0')}`;
          minted.set(id, a);
          return id;
        };
        const m = findingMessage(f, {
          now: NOW,
          buttonsFor,
          hourly,
          ...(podsTotal !== undefined ? { podsTotal } : {}),
          ...(resolved ? { resolved: { at: NOW, note: f.cause.fix } } : {}),
        });
        expect(validateMessage(m)).toEqual([]);
        expect(m.text.trim().length).toBeGreaterThan(0);
        const buttons = buttonsIn(m.blocks);
        if (resolved) expect(buttons).toEqual([]);
        for (const b of buttons) {
          const v = b.value as string;
          expect(v).toMatch(OPAQUE_ID_PATTERN);
          expect(minted.has(v)).toBe(true);
          expect(v).not.toContain(`${f.namespace}/`);
          for (const w of f.workloads) expect(v).not.toContain(`${w.namespace}/${w.name}`);
        }
      }),
      { numRuns: 60, endOnFailure: true },
    );
  });

  it('details, status, verification, approval and history messages stay valid for huge inputs', () => {
    fc.assert(
      fc.property(fc.array(findingArb, { minLength: 1, maxLength: 4 }), nasty(400), many(fc.constantFrom('U0AAAAAAA1', 'S0OPS00001', 'W0CCCCCCC3'), 300), (findings, cluster, approvers) => {
        const f = findings[0]!;
        expect(validateMessage(detailsMessage(f, f.tokens, { now: NOW }))).toEqual([]);
        for (const outcome of ['resolved', 'recurrence'] as const) {
          expect(validateMessage(verificationMessage({ outcome, finding: f, action: 'restart', actionAt: NOW - 3_600_000, now: NOW, staleRequests: 5, lastSeen: NOW }))).toEqual([]);
        }
        const status = statusMessage(
          Array.from({ length: 12 }, (_, i) => ({
            name: `${cluster}-${i}`,
            lastPoll: NOW,
            health: [{ name: cluster, ok: false, detail: f.cause.summary }],
            alertsBySeverity: { critical: 1, warning: 2, info: 3 },
            channel: { id: 'C0OPS00001', error: 'not_in_channel' },
            alerts: findings.map((x) => ({ live: [x], severity: x.severity, permalink: `https://example.slack.com/archives/C0OPS00001/p${i}` })),
          })),
          { now: NOW },
        );
        expect(validateMessage(status)).toEqual([]);
        const approval: Approval = {
          id: 'appr_0000001',
          action: 'restart',
          target: { cluster, kind: 'DaemonSet', namespace: f.namespace, name: f.serviceAccount, findingId: f.id },
          requester: 'U0REQUEST1',
          createdAt: NOW,
          expiresAt: NOW + 1_800_000,
          requiredApprovals: 2,
          votes: approvers.filter((a) => a.startsWith('U')).map((user, i) => ({ user, vote: 'approve' as const, at: NOW + i })),
          state: 'requested',
          dryRun: { ok: true, message: f.cause.fix, at: NOW },
          updatedAt: NOW,
        };
        expect(validateMessage(approvalRequestMessage(approval, { note: f.cause.summary, preserved: f.pods }, approvers, { now: NOW, approveId: 'approve_0001', rejectId: 'reject_00001' }))).toEqual([]);
        expect(validateMessage(approvalRequestMessage({ ...approval, state: 'failed', error: f.cause.summary }, undefined, approvers, { now: NOW }))).toEqual([]);
        const entry = { at: NOW, action: 'restart' as const, target: approval.target, requester: 'U0REQUEST1', approvers, state: 'failed' as const, detail: f.cause.fix };
        expect(validateMessage(historyMessage(cluster, Array(200).fill(entry), { now: NOW }))).toEqual([]);
      }),
      { numRuns: 20, endOnFailure: true },
    );
  });
});
