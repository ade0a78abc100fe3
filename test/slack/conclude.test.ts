/**
 * Findings that conclude (docs/live-mode.md, "Findings that conclude"), end to end through `composeServe`, the real Bolt app (HTTP mode, signed requests)
 * and the loopback Slack and Kubernetes fakes, with the service clock moved by the harness:
 * - "401s now" wording and severity follow when the 401s were last seen, not the finding's existence;
 * - a verified restart concludes the subject's 401 finding too (resolved alert, same verification wording);
 * - quiet resolution after `findings.quietPeriod` of successful polls (never while a poll failed), in place, and a
 *   reopen in the same message with a thread reply when the signal returns;
 * - `/tokens status <cluster>` matches the cluster name case-insensitively.
 */
import { mkdirSync, renameSync, rmdirSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { findingId } from '../../src/findings/build.js';
import { resolveClusterName } from '../../src/slack/commands.js';
import { auditEvent } from '../sources/events.js';
import { APPROVER, blockText, buttonIds, CLUSTER, OPS, overflowLabels, REF, REQUESTER, startHarness, type Harness } from './harness.js';

const MIN = 60_000;
const HOUR = 60 * MIN;

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const lastEphemeral = (x: Harness, user: string) => x.slack.ephemerals({ user }).at(-1)!;
const header = (m: { blocks?: unknown[] }) => (m.blocks![0] as { text: { text: string } }).text.text;
const topLevelPosts = (x: Harness) =>
  x.slack.callsTo('chat.postMessage').filter((c) => c.args.channel === OPS && c.args.thread_ts === undefined && c.status === 200 && c.response.ok === true);

describe('findings that conclude', () => {
  it('401 wording and severity follow the last 401; the verified restart resolves the 401 finding with the stale one', async () => {
    h = await startHarness();
    const store = h.serve.context.store;
    // One alert for the subject's stale tokens and 401s.
    const u401 = await h.alert('kube-system', 'multus', 'unauthorized');
    expect(u401.ts).toBe((await h.alert('kube-system', 'multus', 'stale-token')).ts);
    expect(u401.text).toBe('🔴 [prod-eks] critical: kube-system/multus — requests now fail with 401 (requests rejected with 401 · stale tokens)');
    expect(blockText(u401)).toContain('are being refused by the API server now');
    await h.command('status prod-eks', REQUESTER);
    expect(blockText(lastEphemeral(h, REQUESTER))).toContain('kube-system/multus> — requests now fail with 401 · requests rejected with 401 · stale tokens');

    // Restart requested and approved; the rollout completes.
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    const approval = h.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
    await h.click(APPROVER, approval, 'tw_approve');
    expect((await store.approvals.list({ cluster: CLUSTER }))[0]!.state).toBe('succeeded');

    // 65 min later no 401 arrived: no longer "now"; the worst live fact is the stale tokens' passed rejection date
    // (the stale finding stays critical on its own).
    h.advance(HOUR + 5 * MIN);
    await h.poll();
    const quiet401 = await h.alert('kube-system', 'multus', 'unauthorized');
    expect(quiet401.ts).toBe(u401.ts);
    expect((await store.findings.get(findingId(CLUSTER, 'kube-system', 'multus', 'unauthorized')))!.finding.severity).toBe('warning');
    expect(quiet401.text).toBe('🔴 [prod-eks] critical: kube-system/multus — rejection date passed (requests rejected with 401 · stale tokens)');
    expect(header(quiet401)).toBe('🔴 Critical · prod-eks · kube-system/multus — rejection date passed');
    expect(blockText(quiet401)).not.toContain('fail with 401');
    await h.command('status prod-eks', REQUESTER);
    let status = lastEphemeral(h, REQUESTER);
    expect(status.text).toBe('Tokenwatch status — prod-eks: 1 critical, 0 warning, 3 info');
    expect(blockText(status)).toContain('kube-system/multus> — rejection date passed');

    // After the settle period the restart is verified: both findings of the subject are resolved.
    h.advance(HOUR);
    await h.poll();
    const id401 = findingId(CLUSTER, 'kube-system', 'multus', 'unauthorized');
    expect(await store.findings.get(id401)).toMatchObject({ status: 'resolved', resolution: 'verified' });
    expect(await store.findings.get(findingId(CLUSTER, 'kube-system', 'multus', 'stale-token'))).toMatchObject({ status: 'resolved', resolution: 'verified' });
    const resolved401 = await h.alert('kube-system', 'multus', 'unauthorized');
    expect(resolved401.text).toBe('✅ [prod-eks] resolved: kube-system/multus (requests rejected with 401 · stale tokens)');
    // Nothing to act on: only Details (the pods seen before, exact figures) stays in its menu.
    expect(buttonIds(resolved401)).toEqual(['tw_more']);
    expect(overflowLabels(resolved401)).toEqual(['Details']);
    expect(blockText(resolved401)).toContain('no stale token use and no 401s after the fix for the settle period');
    // Said once, for the alert, naming every signal that stayed quiet.
    expect(h.slack.thread(OPS, alert.ts).map((m) => m.text).filter((t) => t.includes('verified'))).toEqual([
      '✅ [prod-eks] verified: no stale token use or 401 Unauthorized responses by kube-system/multus since the restart; alert resolved',
    ]);
    const approvalId = (await store.approvals.list({ cluster: CLUSTER }))[0]!.id;
    expect((await store.actions.ofApproval(approvalId)).filter((r) => r.action === 'verification.resolved').map((r) => r.findingId).sort()).toEqual(
      [findingId(CLUSTER, 'kube-system', 'multus', 'stale-token'), id401].sort(),
    );
    // /tokens status counts no concluded finding as critical.
    await h.command('status prod-eks', REQUESTER);
    status = lastEphemeral(h, REQUESTER);
    expect(status.text).toBe('Tokenwatch status — prod-eks: 0 critical, 0 warning, 3 info');
    expect(blockText(status)).not.toContain('multus');
    expect(topLevelPosts(h)).toHaveLength(4);
  });

  it('quiet: no signal for the quiet period while every poll succeeded → resolved in place; a failed poll blocks it; the signal returning reopens the same message', async () => {
    h = await startHarness();
    const store = h.serve.context.store;
    const deployer = await h.alert('ci', 'deployer', 'legacy-token');
    expect(overflowLabels(deployer)).toContain('Recreate ServiceAccount…');
    const id = findingId(CLUSTER, 'ci', 'deployer', 'legacy-token');
    const poller = h.serve.context.clusters.get(CLUSTER)!.poller;

    // Two hours in, the audit source breaks for one poll (the log path is a directory).
    h.advance(2 * HOUR);
    renameSync(h.auditPath, `${h.auditPath}.away`);
    mkdirSync(h.auditPath);
    const failed = await poller.pollOnce();
    await h.bot.idle();
    expect(failed.error).toBeDefined();
    rmdirSync(h.auditPath);
    renameSync(`${h.auditPath}.away`, h.auditPath);

    // 25 h after the start: the signal has been absent for more than 24 h, but a poll failed in the period.
    h.advance(23 * HOUR);
    const blocked = await poller.pollOnce();
    await h.bot.idle();
    expect(blocked.error).toBeUndefined();
    expect(blocked.concluded).toEqual([]);
    expect((await store.findings.get(id))!.status).toBe('open');
    expect(overflowLabels(await h.alert('ci', 'deployer', 'legacy-token'))).toContain('Recreate ServiceAccount…');

    // Another 24 h of successful polls: resolved as quiet, the alert updated in place, buttons removed.
    h.advance(24 * HOUR);
    const quiet = await poller.pollOnce();
    await h.bot.idle();
    expect(quiet.concluded).toContain(id);
    expect(await store.findings.get(id)).toMatchObject({ status: 'resolved', resolution: 'quiet' });
    const resolved = await h.alert('ci', 'deployer', 'legacy-token');
    expect(resolved.ts).toBe(deployer.ts);
    expect(resolved.text).toBe('✅ [prod-eks] resolved: ci/deployer (legacy Secret token)');
    expect(buttonIds(resolved)).toEqual(['tw_more']);
    expect(overflowLabels(resolved)).toEqual(['Details']);
    expect(blockText(resolved)).toContain('no signal for 24 h while every poll succeeded (quiet)');
    expect((await store.actions.list(CLUSTER)).find((r) => r.findingId === id)).toMatchObject({ action: 'finding.quiet', result: 'resolved', actor: null });
    // A stale-token finding with a live token is not resolved however quiet it is.
    expect((await store.findings.get(findingId(CLUSTER, 'logging', 'fluent-bit', 'stale-token')))!.status).toBe('open');
    await h.command('status prod-eks', REQUESTER);
    expect(blockText(lastEphemeral(h, REQUESTER))).not.toContain('ci/deployer');

    // Ten minutes later the legacy token is used again: same message reopened, buttons back, a thread reply.
    h.advance(10 * MIN);
    h.appendAudit([auditEvent({ auditID: 'legacy-again-1', time: h.now() - MIN, kind: 'legacy', namespace: 'ci', serviceAccount: 'deployer', legacySecret: 'deployer-token' })]);
    await h.poll();
    expect(await store.findings.get(id)).toMatchObject({ status: 'open', resolution: null });
    const reopened = await h.alert('ci', 'deployer', 'legacy-token');
    expect(reopened.ts).toBe(deployer.ts);
    expect(reopened.text).toBe('🔵 [prod-eks] info: ci/deployer — legacy Secret token in use (legacy Secret token)');
    expect(overflowLabels(reopened)).toContain('Recreate ServiceAccount…');
    expect(h.slack.thread(OPS, deployer.ts).map((m) => m.text)).toEqual(['[prod-eks] ci/deployer reopened: seen again after it was resolved']);
    expect(topLevelPosts(h)).toHaveLength(4);
    expect(Date.parse((await store.findings.get(id))!.finding.lastSeen)).toBeGreaterThan(REF + 48 * HOUR);
  });

  it('/tokens status <cluster> matches the cluster name case-insensitively', async () => {
    h = await startHarness();
    await h.command('status PROD-EKS', REQUESTER);
    expect(lastEphemeral(h, REQUESTER).text).toMatch(/^Tokenwatch status — prod-eks: /);
    await h.command('history Prod-Eks', REQUESTER);
    expect(lastEphemeral(h, REQUESTER).text).not.toMatch(/Unknown cluster/);
  });
});

describe('resolveClusterName', () => {
  it('exact first, else the one name equal ignoring case; ambiguous or unknown → undefined', () => {
    expect(resolveClusterName('prod', ['prod', 'Prod'])).toBe('prod');
    expect(resolveClusterName('PROD-EKS', ['prod-eks', 'staging'])).toBe('prod-eks');
    expect(resolveClusterName('PROD', ['prod', 'Prod'])).toBeUndefined();
    expect(resolveClusterName('dev', ['prod'])).toBeUndefined();
  });
});
