/**
 * Paging for critical alerts nobody acts on (docs/slack.md "Paging"), end to end: the real `tokenwatch serve` and Bolt
 * app against the loopback fakes of Slack, Kubernetes, the PagerDuty Events API v2 and a generic webhook
 * (src/sandbox/fakes/pagerduty.ts), with the service clock moved by the test. One trigger per critical alert and
 * target, one resolve when it resolves; an alert acted on, and warning and info alerts, never page.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { groupIdOf, worstSeverity } from '../../src/findings/groups.js';
import { FAKE_ROUTING_KEY, startFakePagerDuty, startFakeWebhook, type FakePagerDuty, type FakeWebhook } from '../../src/sandbox/fakes/pagerduty.js';
import type { StoredFinding } from '../../src/store/index.js';
import { APPROVER, CLUSTER, OPS, REQUESTER, startHarness, type Harness } from './harness.js';

const MIN = 60_000;
const HOUR = 60 * MIN;

let h: Harness | undefined;
let pd: FakePagerDuty | undefined;
let hook: FakeWebhook | undefined;
afterEach(async () => {
  await h?.stop();
  await pd?.close();
  await hook?.close();
  h = undefined;
  pd = undefined;
  hook = undefined;
});

async function start(logs?: Array<Record<string, unknown>>): Promise<Harness> {
  pd = await startFakePagerDuty();
  hook = await startFakeWebhook();
  const [pdUrl, hookUrl] = [pd.url, hook.url];
  return startHarness({
    ...(logs ? { logs, logLevel: 'debug' } : {}),
    tweak: (c) => {
      c.slack!.paging = { after: 10 * MIN, pagerduty: { url: pdUrl }, webhook: { url: hookUrl } };
      c.slack!.pagerdutyRoutingKey = FAKE_ROUTING_KEY;
    },
  });
}

async function sweep(x: Harness): Promise<void> {
  await x.bot.sweep();
  await x.bot.idle();
}

/** The open alert groups of prod-eks and their severity (the worst of their open findings). */
async function groups(x: Harness): Promise<Map<string, { severity: string; members: StoredFinding[] }>> {
  const out = new Map<string, { severity: string; members: StoredFinding[] }>();
  for (const f of await x.serve.context.store.findings.list(CLUSTER, { status: ['open'] })) {
    const g = groupIdOf(f.finding);
    const members = [...(out.get(g)?.members ?? []), f];
    out.set(g, { severity: worstSeverity(members), members });
  }
  return out;
}

const hookBodies = () => hook!.requests.map((r) => r.body as { event_action: string; dedup_key: string; group_id: string; severity: string });

describe('paging', () => {
  it('a critical alert nobody acts on pages once per target; warning and info never; its resolution sends one resolve', async () => {
    const logs: Array<Record<string, unknown>> = [];
    h = await start(logs);
    const all = await groups(h);
    const critical = [...all].filter(([, g]) => g.severity === 'critical').map(([id]) => id);
    const calmer = [...all].filter(([, g]) => g.severity !== 'critical').map(([id]) => id);
    const multus = groupIdOf({ cluster: CLUSTER, namespace: 'kube-system', serviceAccount: 'multus' });
    expect(critical).toContain(multus);
    expect(calmer.length).toBeGreaterThan(0); // the example has warning/info alerts too

    // Within the 10 minutes: nothing.
    h.advance(9 * MIN);
    await sweep(h);
    expect(pd!.events).toEqual([]);
    expect(hook!.requests).toEqual([]);

    // After them: one trigger per critical alert to PagerDuty and to the webhook, none for the others. PagerDuty
    // answers the first one 500: it stays queued and goes again after its backoff (5 s on the queue's clock).
    pd!.failNext(500, 1);
    h.advance(2 * MIN);
    await sweep(h);
    expect(pd!.events.map((e) => e.status)).toEqual([500]);
    h.advance(10_000);
    await h.bot.idle();
    pd!.events.splice(0, 1); // the refused one; what follows are the accepted events
    expect(pd!.alerts().map((a) => a.dedupKey).sort()).toEqual(critical.map((g) => `tokenwatch/${g}/1`).sort());
    expect(pd!.events.every((e) => e.status === 202 && e.body.event_action === 'trigger')).toBe(true);
    expect(pd!.events).toHaveLength(critical.length);
    const multusAlert = pd!.alerts().find((a) => a.dedupKey === `tokenwatch/${multus}/1`)!;
    expect(multusAlert).toMatchObject({ severity: 'critical', source: CLUSTER, status: 'triggered', triggers: 1 });
    expect(multusAlert.summary).toContain('ServiceAccount kube-system/multus');
    expect(hookBodies().map((b) => b.group_id).sort()).toEqual([...critical].sort());
    expect(hookBodies().every((b) => b.event_action === 'trigger' && b.severity === 'critical')).toBe(true);
    expect(hook!.requests.find((r) => (r.body as { group_id: string }).group_id === multus)!.idempotencyKey).toBe(`page:${multus}:1:trigger:webhook`);
    for (const g of calmer) expect(JSON.stringify(pd!.events) + JSON.stringify(hook!.requests)).not.toContain(g);

    // More sweeps and polls page nothing again.
    await sweep(h);
    await h.poll();
    h.advance(30 * MIN);
    await sweep(h);
    expect(pd!.events).toHaveLength(critical.length);
    expect(hook!.requests).toHaveLength(critical.length);

    // The fix: requested, approved, verified after the settle period → the alert resolves → one resolve each.
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    const approval = h.slack.thread(OPS, alert.ts).find((m) => m.text.includes('approval needed'))!;
    await h.click(APPROVER, approval, 'tw_approve');
    h.advance(2 * HOUR + MIN);
    await h.poll();
    await sweep(h);
    const resolves = pd!.events.filter((e) => e.body.event_action === 'resolve');
    expect(resolves.map((e) => e.body.dedup_key)).toEqual([`tokenwatch/${multus}/1`]);
    expect(resolves[0]!.status).toBe(202);
    expect(pd!.alerts().find((a) => a.dedupKey === `tokenwatch/${multus}/1`)!.status).toBe('resolved');
    expect(hookBodies().filter((b) => b.event_action === 'resolve').map((b) => b.dedup_key)).toEqual([`tokenwatch/${multus}/1`]);
    await sweep(h);
    await h.poll();
    expect(pd!.events.filter((e) => e.body.event_action === 'resolve')).toHaveLength(1);
    // The routing key is never in Slack nor in the log; the log says what paged, and the 500 it retried.
    expect(JSON.stringify(h.slack.snapshot())).not.toContain(FAKE_ROUTING_KEY);
    expect(JSON.stringify(logs)).not.toContain(FAKE_ROUTING_KEY);
    expect(logs.filter((l) => l['msg'] === 'paging: a critical alert nobody acted on')).toHaveLength(2 * critical.length);
    expect(JSON.stringify(logs.filter((l) => l['msg'] === 'a Slack notification failed; it stays queued and is tried again'))).toContain('paging via pagerduty failed: HTTP 500');
  });

  it('an alert acted on (a Details view) within the time does not page', async () => {
    h = await start();
    const critical = [...(await groups(h))].filter(([, g]) => g.severity === 'critical').map(([id]) => id);
    const multus = groupIdOf({ cluster: CLUSTER, namespace: 'kube-system', serviceAccount: 'multus' });
    expect(critical).toEqual([multus]);
    await h.click(REQUESTER, await h.alert('kube-system', 'multus'), 'tw_details');
    h.advance(11 * MIN);
    await sweep(h);
    expect(pd!.events).toEqual([]);
    expect(hook!.requests).toEqual([]);
    await h.poll();
    h.advance(HOUR);
    await sweep(h);
    expect(pd!.events).toEqual([]);
  });
});
