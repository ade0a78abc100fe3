/**
 * A signing-key rotation in live mode (clastix/kamaji#1325: the issuer's key rotated, every ServiceAccount's tokens
 * refused at once, pods recovering on their own), end to end through `composeServe`'s poller, the real Bolt app (HTTP
 * mode) and the loopback Slack and Kubernetes fakes. Six unrelated workloads in four namespaces start getting 401 in
 * the same minute; five recover within three minutes, one keeps failing. tokenwatch says so once in the ops channel
 * and in `/tokens status`; the recovered ServiceAccounts' 401 alerts have no "caches its token" cause and no Restart
 * button; the one still failing keeps its own analysis and its Restart button.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { findingId } from '../../src/findings/build.js';
import type { KubeObject } from '../../src/sandbox/fakes/kubernetes/types.js';
import { auditEvent } from '../sources/events.js';
import { blockText, buttonIds, CLUSTER, OPS, REQUESTER, startHarness, type Harness } from './harness.js';

const MIN = 60_000;

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

/** The clients of the report: cluster add-ons and applications, each a DaemonSet with one pod (its own IP). */
const CLIENTS = [
  { ns: 'kube-system', sa: 'coredns', ip: '10.77.0.11', ua: 'coredns/v1.11.1' },
  { ns: 'kube-system', sa: 'konnectivity-agent', ip: '10.77.0.12', ua: 'proxy-agent/v0.0.0' },
  { ns: 'cert-manager', sa: 'cert-manager', ip: '10.77.0.14', ua: 'cert-manager/v1.14.0' },
  { ns: 'monitoring', sa: 'prometheus', ip: '10.77.0.15', ua: 'Prometheus/2.50.0' },
  { ns: 'monitoring', sa: 'node-exporter', ip: '10.77.0.16', ua: 'node-exporter/1.8.0' },
  { ns: 'apps', sa: 'reporter', ip: '10.77.0.17', ua: 'Java/17' },
] as const;

function objectsOf(c: (typeof CLIENTS)[number]): KubeObject[] {
  const uid = `${c.sa}-ds-uid-0000-000000000001`;
  const labels = { app: c.sa };
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: c.sa, namespace: c.ns, uid, generation: 1 },
      spec: { selector: { matchLabels: labels }, updateStrategy: { type: 'RollingUpdate' }, template: { metadata: { labels }, spec: { serviceAccountName: c.sa, containers: [{ name: 'app', image: `acme/${c.sa}:1.0` }] } } },
      status: { desiredNumberScheduled: 1, currentNumberScheduled: 1, updatedNumberScheduled: 1, numberReady: 1, numberAvailable: 1, observedGeneration: 1 },
    },
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `${c.sa}-x1`, namespace: c.ns, uid: `${c.sa}-pod-uid-0000-000000000001`, labels, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: c.sa, uid, controller: true }] },
      spec: { serviceAccountName: c.sa, nodeName: 'ip-192-168-14-201.us-west-2.compute.internal', containers: [{ name: 'app', image: `acme/${c.sa}:1.0` }] },
      status: { phase: 'Running', startTime: '2026-11-01T00:00:00Z', podIP: c.ip, hostIP: '192.168.14.201' },
    },
  ];
}

describe('signing-key rotation in live mode', () => {
  it('said once per cluster (ops channel and /tokens status); recovered ServiceAccounts: no "caches its token" cause, no Restart; the one still failing keeps both', async () => {
    h = await startHarness();
    for (const c of CLIENTS) for (const o of objectsOf(c)) h.kube.store.put(o);
    const onset = h.now() - 30 * MIN;
    const lines: string[] = [];
    CLIENTS.forEach((c, i) => {
      // An hour before, each client's own (stale but accepted) token use from its pod: live mode attributes the 401s
      // by this source IP and user agent (src/findings/aggregate.ts).
      lines.push(auditEvent({ auditID: `${c.sa}-stale`, time: onset - 60 * MIN, kind: 'stale', namespace: c.ns, serviceAccount: c.sa, pod: `${c.sa}-x1`, secondsAfterWarning: 3600, sourceIP: c.ip, userAgent: c.ua }));
      const first = onset + i * 5_000;
      // `reporter` keeps failing until now; the others stop after three minutes (the kubelet fetched new tokens).
      const last = c.sa === 'reporter' ? h!.now() - MIN : first + 3 * MIN;
      for (let t = first; t <= last; t += MIN) lines.push(auditEvent({ auditID: `${c.sa}-${t}`, time: t, kind: 'unauthorized', sourceIP: c.ip, userAgent: c.ua }));
    });
    h.appendAudit(lines);
    const topLevel = () => h!.slack.callsTo('chat.postMessage').filter((x) => x.args.channel === OPS && x.args.thread_ts === undefined && x.response.ok === true);
    const before = topLevel().length;
    await h.poll();

    // One message for the cluster event, naming who recovered and who still fails.
    const announcements = topLevel().filter((x) => String(x.args.text).includes('cluster-level event'));
    expect(announcements.map((x) => x.args.text)).toEqual([
      `[${CLUSTER}] cluster-level event: 6 ServiceAccounts refused at once at ${new Date(onset).toISOString().slice(0, 16).replace('T', ' ')} UTC (signing-key rotation or issuer change), not clients caching tokens`,
    ]);
    const text = JSON.stringify(announcements[0]!.args.blocks);
    expect(text).toContain('signing key rotates or its issuer changes');
    expect(text).toContain('*Recovered on their own:* `cert-manager/cert-manager`, `kube-system/coredns`, `kube-system/konnectivity-agent`, `monitoring/node-exporter`, `monitoring/prometheus`');
    expect(text).toContain('`apps/reporter`');

    // The recovered ones: 401 alerts without "caches its token" and without a Restart button; not critical.
    const store = h.serve.context.store;
    for (const c of CLIENTS.filter((x) => x.sa !== 'reporter')) {
      const f = (await store.findings.get(findingId(CLUSTER, c.ns, c.sa, 'unauthorized')))!;
      expect(f.finding.cause.id, c.sa).toBe('unknown');
      expect(f.finding.severity, c.sa).toBe('warning');
      expect(f.finding.workloads, c.sa).toContainEqual({ kind: 'DaemonSet', namespace: c.ns, name: c.sa });
      const alert = await h.alert(c.ns, c.sa, 'unauthorized');
      expect(blockText(alert), c.sa).not.toMatch(/caches (its|a) token/);
      expect(blockText(alert), c.sa).toContain('cluster-level event');
      // The alert is the ServiceAccount's: a Restart is offered only for its own stale tokens (a live stale-token
      // finding of it), never for the 401s of the event.
      const stale = await store.findings.get(findingId(CLUSTER, c.ns, c.sa, 'stale-token'));
      const restarts = buttonIds(alert).filter((b) => b.startsWith('tw_restart'));
      if (stale && stale.status !== 'resolved') expect(restarts.length, c.sa).toBeGreaterThan(0);
      else expect(restarts, c.sa).toEqual([]);
      expect(blockText(alert), c.sa).not.toContain('requests now fail with 401');
    }
    // The one still failing after the others recovered: its own analysis, and a Restart of its DaemonSet.
    const reporter = (await store.findings.get(findingId(CLUSTER, 'apps', 'reporter', 'unauthorized')))!;
    expect(reporter.finding.cause.summary).not.toContain('cluster-level event');
    expect(buttonIds(await h.alert('apps', 'reporter', 'unauthorized'))).toContain('tw_restart');

    // /tokens status says it, in one line.
    await h.command('status prod-eks', REQUESTER);
    const status = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(status.match(/cluster event: /g)).toHaveLength(1);
    expect(status).toContain('cluster event: 6 ServiceAccounts refused at once');
    expect(status).toContain('still failing: apps/reporter');

    // Later polls (and the event still in the records) do not say it again.
    const posted = topLevel().length;
    h.advance(5 * MIN);
    await h.poll();
    await h.poll();
    expect(topLevel().filter((x) => String(x.args.text).includes('cluster-level event'))).toHaveLength(1);
    expect(topLevel().length).toBe(posted);
    // Besides the announcement: one alert per client (its 401s and stale tokens are one root cause's signals), and the
    // one critical cluster-level finding (namespace and ServiceAccount `*`), without a Restart button.
    expect(posted - before).toBe(1 + CLIENTS.length + 1);
    const clusterAlert = await h.alert('*', '*', 'cluster-credential');
    expect(blockText(clusterAlert)).toContain('API server refused valid-looking tokens from 6 ServiceAccounts: signing key changed / servers disagree / clock skew');
    expect(buttonIds(clusterAlert).filter((b) => b.startsWith('tw_restart') || b.startsWith('tw_recreate'))).toEqual([]);
    expect((await store.findings.get(findingId(CLUSTER, '*', '*', 'cluster-credential')))!.finding.severity).toBe('critical');
    expect((await store.actions.list(CLUSTER)).filter((r) => r.action === 'cluster.credential-event')).toHaveLength(1);
  }, 120_000);
});
