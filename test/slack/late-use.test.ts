/**
 * A use delivered late reopens a quiet-resolved alert, end to end through `composeServe`'s poller, the real Bolt app
 * (HTTP mode) and the loopback Slack and Kubernetes fakes: the legacy-token finding of `ci/deployer` is resolved as
 * quiet after 24 h of successful polls; then an audit event dated one minute before that resolution arrives two
 * minutes after it (as CloudWatch delivers events late, inside the poll overlap). The request count rises, so the
 * alert reopens in the same message with a thread reply saying it was seen late, and `/tokens status` lists it again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { findingId } from '../../src/findings/build.js';
import { auditEvent } from '../sources/events.js';
import { blockText, CLUSTER, OPS, overflowLabels, REQUESTER, startHarness, type Harness } from './harness.js';

const MIN = 60_000;
const HOUR = 60 * MIN;

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

describe('late-delivered use', () => {
  it('dated inside the quiet-resolved period: the same alert reopens, a thread reply says it was seen late, /tokens status lists it', async () => {
    h = await startHarness();
    const store = h.serve.context.store;
    const id = findingId(CLUSTER, 'ci', 'deployer', 'legacy-token');
    const deployer = await h.alert('ci', 'deployer', 'legacy-token');
    const requestsBefore = (await store.findings.get(id))!.finding.requests;

    // 25 h of successful polls without the signal: resolved as quiet, in place.
    h.advance(25 * HOUR);
    const quiet = await h.serve.context.clusters.get(CLUSTER)!.poller.pollOnce();
    await h.bot.idle();
    expect(quiet.concluded).toContain(id);
    const resolvedAt = (await store.findings.get(id))!.resolvedAt!;
    expect(await store.findings.get(id)).toMatchObject({ status: 'resolved', resolution: 'quiet' });
    expect((await h.alert('ci', 'deployer', 'legacy-token')).text).toBe('✅ [prod-eks] resolved: ci/deployer (legacy Secret token)');

    // Two minutes later the audit log delivers a use dated one minute before the resolution.
    h.advance(2 * MIN);
    h.appendAudit([auditEvent({ auditID: 'legacy-late-1', time: resolvedAt - MIN, kind: 'legacy', namespace: 'ci', serviceAccount: 'deployer', legacySecret: 'deployer-token' })]);
    await h.poll();
    const stored = (await store.findings.get(id))!;
    expect(stored.finding.requests).toBe(requestsBefore + 1);
    expect(Date.parse(stored.finding.lastSeen)).toBe(resolvedAt - MIN);
    expect(stored).toMatchObject({ status: 'open', resolution: null, resolvedAt: null });
    const reopened = await h.alert('ci', 'deployer', 'legacy-token');
    expect(reopened.ts).toBe(deployer.ts);
    expect(reopened.text).toBe('🔵 [prod-eks] info: ci/deployer — legacy Secret token in use (legacy Secret token)');
    expect(overflowLabels(reopened)).toContain('Recreate ServiceAccount…');
    const replies = h.slack.thread(OPS, deployer.ts);
    expect(replies.map((m) => m.text)).toEqual(['[prod-eks] ci/deployer reopened: a use before its quiet resolution was seen late']);
    expect(blockText(replies[0]!)).toContain(`before it was resolved as quiet <!date^${Math.floor(resolvedAt / 1000)}^`);
    // One message per root cause: nothing new was posted at the top level.
    expect(h.slack.callsTo('chat.postMessage').filter((c) => c.args.channel === OPS && c.args.thread_ts === undefined && c.response.ok === true)).toHaveLength(4);

    await h.command('status prod-eks', REQUESTER);
    expect(blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!)).toContain('ci/deployer');

    // The same events again (nothing new): no second reply.
    await h.poll();
    expect(h.slack.thread(OPS, deployer.ts)).toHaveLength(1);
  }, 120_000);
});
