/**
 * Health that tells the truth (src/observability/health.ts, docs/live-mode.md "Health"), through the real `serve`
 * (`composeServe`, the Bolt app on the fake Slack, the fake Kubernetes API server): a cluster whose Kubernetes API is
 * unreachable, one whose kubeconfig is malformed, and a Slack bot token Slack rejects each show, per cluster and
 * access, in the `/readyz` body, `/tokens status`, the Home tab's data and the `tokenwatch_access_failing` metric —
 * never as "ok" — while `/readyz` answers 200 as long as the pod serves something and 503 once it serves nothing.
 * No token reaches any of them.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import type { ServeHandle } from '../../src/runtime/serve-options.js';
import { sourcesOf } from '../../src/slack/home.js';
import { DEFAULT_BOT_TOKEN, startFakeSlack, type FakeSlack } from '../../src/sandbox/fakes/slack.js';
import { auditEvent } from '../sources/events.js';
import { CLUSTER, REF, REQUESTER, SECRET, blockText, startHarness, type Harness } from '../slack/harness.js';

const DOWN = 'down-eks';
const BROKEN = 'broken-eks';
const DOWN_TOKEN = 'down-cluster-secret-token-0123456789';
const BROKEN_TOKEN = 'broken-kubeconfig-secret-token-0123456789';
const REJECTED_BOT_TOKEN = 'xoxb-999-888-rejectedRejectedRejected';

/** A loopback port nothing listens on (bound, then closed): connections to it are refused. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Two kubeconfigs: one whose API server refuses connections, one that is not valid YAML (with a token in it). */
async function brokenAccess(dir: string): Promise<{ down: string; broken: string; port: number }> {
  const port = await closedPort();
  const down = join(dir, 'down.kubeconfig');
  writeFileSync(
    down,
    `apiVersion: v1\nkind: Config\nclusters:\n- name: down\n  cluster:\n    server: http://127.0.0.1:${port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: ${DOWN_TOKEN}\ncontexts:\n- name: down\n  context:\n    cluster: down\n    user: u\ncurrent-context: down\n`,
  );
  const broken = join(dir, 'broken.kubeconfig');
  writeFileSync(broken, `apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: ${BROKEN_TOKEN}\n   bad: [indent\ncontexts: {\n`);
  return { down, broken, port };
}

/** Fails the test when any secret of the scenario appears in `text`. */
function expectNoSecret(text: string): void {
  for (const secret of [DOWN_TOKEN, BROKEN_TOKEN, REJECTED_BOT_TOKEN, DEFAULT_BOT_TOKEN, SECRET, 'fake-token']) expect(text).not.toContain(secret);
}

describe('health that tells the truth (serve with broken access)', () => {
  let h: Harness | undefined;
  let handle: ServeHandle | undefined;
  let slack: FakeSlack | undefined;
  afterEach(async () => {
    await h?.stop();
    await handle?.stop();
    await slack?.close();
    h = handle = slack = undefined;
  });

  it('an unreachable Kubernetes API and a malformed kubeconfig: /readyz, /tokens status, Home and the metric say which access failed, per cluster', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-health-'));
    const { down, broken, port } = await brokenAccess(dir);
    const emptyAudit = join(dir, 'empty.log');
    writeFileSync(emptyAudit, '');
    h = await startHarness({
      tweak: (c) => {
        c.poll.requestTimeout = 5_000;
        const base = c.clusters[0]!;
        c.clusters.push({ ...base, name: DOWN, audit: { file: { path: emptyAudit } }, kubernetes: { kubeconfig: down } });
        c.clusters.push({ ...base, name: BROKEN, audit: { file: { path: emptyAudit } }, kubernetes: { kubeconfig: broken } });
      },
    });
    // The harness waited for every cluster's first poll; the Kubernetes API is checked after each.
    const res = await fetch(`http://127.0.0.1:${h.serve.port}/readyz`);
    const raw = await res.text();
    expectNoSecret(raw);
    const body = JSON.parse(raw) as { status: string; serves: string[]; polls: Record<string, string>; access: Record<string, Record<string, string>> };
    // The pod serves Slack and polls: it stays in the Service.
    expect(res.status).toBe(200);
    expect(body.status).toBe('ready');
    expect(body.serves).toEqual(['slack', 'polls']);
    // staging-eks alerts in a channel the bot is not in (the fake's staging channel): its Slack access fails too.
    expect(body.polls).toEqual({ [CLUSTER]: 'ok', 'staging-eks': 'degraded', [DOWN]: 'degraded', [BROKEN]: 'degraded' });
    expect(body.access['staging-eks']!.slack).toBe("Slack cannot post to the cluster's alert channel: Slack answered not_in_channel, since 12:00 UTC");
    expect(body.access[CLUSTER]).toEqual({ audit: 'audit source: ok', kubernetes: 'Kubernetes API: ok', watchCache: 'watch cache: ok', slack: 'Slack: ok' });
    // The poll itself succeeded (its audit source reads fine): the Kubernetes API is what fails, said with its time.
    expect(body.access[DOWN]!.audit).toBe('audit source: ok');
    expect(body.access[DOWN]!.kubernetes).toMatch(new RegExp(`^Kubernetes API unreachable: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}, since 12:00 UTC$`));
    expect(body.access[DOWN]!.watchCache).toMatch(/^watch cache not synced yet \(pods: connect ECONNREFUSED .*, since 12:00 UTC$/);
    expect(body.access[BROKEN]!.kubernetes).toMatch(new RegExp(`^Kubernetes API not set up: Kubernetes access for cluster ${BROKEN} failed: cannot load kubeconfig ${broken.replace(/[.]/g, '\\.')}: .+, since 12:00 UTC$`));
    expect(body.access[BROKEN]!.watchCache).toBe('watch cache not started: no Kubernetes access, since 12:00 UTC');

    // /tokens status: the same words.
    await h.command(`status ${DOWN}`, REQUESTER);
    let status = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expectNoSecret(status);
    expect(status).toContain(`❌ Kubernetes API unreachable: connect ECONNREFUSED 127.0.0.1:${port}, since 12:00 UTC`);
    expect(status).toContain('❌ watch cache not synced yet (');
    expect(status).toContain('✅ Slack: ok');
    await h.command(`status ${BROKEN}`, REQUESTER);
    status = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expectNoSecret(status);
    expect(status).toContain(`❌ Kubernetes API not set up: Kubernetes access for cluster ${BROKEN} failed: cannot load kubeconfig`);
    await h.command(`status ${CLUSTER}`, REQUESTER);
    status = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(status).toContain('✅ Kubernetes API: ok');
    expect(status).not.toContain('❌');

    // The Home tab's data of the cluster: the failing access in the same words.
    const home = sourcesOf(h.serve.context.clusters.get(DOWN)!, h.now());
    expect(home).toContainEqual({ name: `Kubernetes API unreachable: connect ECONNREFUSED 127.0.0.1:${port}, since 12:00 UTC`, state: 'failing' });
    const prodHome = sourcesOf(h.serve.context.clusters.get(CLUSTER)!, h.now());
    for (const name of ['audit log', 'Kubernetes API', 'watch cache', 'Slack']) expect(prodHome).toContainEqual({ name, state: 'ok' });

    // The metric: 1 per failing access.
    const text = await h.metrics.text();
    expect(text).toContain(`tokenwatch_access_failing{cluster="${DOWN}",access="kubernetes"} 1`);
    expect(text).toContain(`tokenwatch_access_failing{cluster="${BROKEN}",access="kubernetes"} 1`);
    expect(text).toContain(`tokenwatch_access_failing{cluster="${DOWN}",access="audit"} 0`);
    expect(text).toContain(`tokenwatch_access_failing{cluster="${CLUSTER}",access="kubernetes"} 0`);
    expectNoSecret(text);

    // The failure keeps the time it started while later attempts fail too.
    h.advance(3_600_000);
    await h.serve.context.scheduler.runNow(DOWN);
    await h.serve.context.scheduler.current(DOWN);
    expect(h.serve.readiness().access[DOWN]!.kubernetes).toMatch(/, since 12:00 UTC$/);
  });

  it('a rejected Slack token, an unreachable Kubernetes API and a malformed kubeconfig: /readyz says each, per cluster; 200 while polls work, 503 once the pod serves nothing', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-health-slack-'));
    const { down, broken, port } = await brokenAccess(dir);
    const audit = join(dir, 'audit.log');
    writeFileSync(audit, auditEvent({ auditID: 'a1', time: REF - 60_000, kind: 'stale', secondsAfterWarning: 100 }) + '\n');
    slack = await startFakeSlack({ channels: [{ id: 'C0OPS00001', name: 'ops' }] });
    const start = async (clusters: unknown[]): Promise<ServeHandle> =>
      composeServe(
        parseConfig(
          {
            store: { path: join(dir, `tw-${clusters.length}.db`) },
            http: { host: '127.0.0.1', port: 0 },
            slack: { enabled: true, mode: 'http', apiUrl: slack!.apiUrl, port: 0 },
            clusters,
          },
          { SLACK_BOT_TOKEN: REJECTED_BOT_TOKEN, SLACK_SIGNING_SECRET: SECRET },
        ),
        { logger: createLogger({ level: 'silent' }), metrics: new Metrics(), jitterMs: 0, spread: false, clock: () => REF, slack: { host: '127.0.0.1' } },
      );
    const ch = { channel: 'C0OPS00001', approvers: ['U0APPROVE1'] };
    handle = await start([
      { name: DOWN, audit: { file: { path: audit } }, kubernetes: { kubeconfig: down, watch: false }, schedule: '0 0 1 1 *', slack: ch },
      { name: BROKEN, audit: { file: { path: audit } }, kubernetes: { kubeconfig: broken }, schedule: '0 0 1 1 *', slack: ch },
    ]);
    await handle.firstPolls;
    let res = await fetch(`http://127.0.0.1:${handle.port}/readyz`);
    let raw = await res.text();
    expectNoSecret(raw);
    let body = JSON.parse(raw) as { serves: string[]; polls: Record<string, string>; access: Record<string, Record<string, string>>; integrations: Record<string, string> };
    // Polls still work (findings are stored): 200, and the body says what fails.
    expect(res.status).toBe(200);
    expect(body.serves).toEqual(['polls']);
    expect(body.integrations).toEqual({ slack: 'failed' });
    expect(body.polls).toEqual({ [DOWN]: 'degraded', [BROKEN]: 'degraded' });
    for (const c of [DOWN, BROKEN]) {
      expect(body.access[c]!.audit).toBe('audit source: ok');
      expect(body.access[c]!.slack).toMatch(/^Slack failed to start: Slack rejected the bot token \(auth\.test: invalid_auth\): check SLACK_BOT_TOKEN.*, since 12:00 UTC$/);
    }
    expect(body.access[DOWN]!.kubernetes).toBe(`Kubernetes API unreachable: connect ECONNREFUSED 127.0.0.1:${port}, since 12:00 UTC`);
    expect(body.access[DOWN]!.watchCache).toBe('watch cache: not used (kubernetes.watch: false)');
    expect(body.access[BROKEN]!.kubernetes).toMatch(/^Kubernetes API not set up: .*cannot load kubeconfig/);
    expect(await handle.context.store.findings.list(DOWN)).toHaveLength(1);
    await handle.stop();

    // Nothing served: Slack rejected, no audit webhook, and the only cluster's audit source fails → 503, saying why.
    handle = await start([{ name: DOWN, audit: { file: { path: join(dir, 'no-such-audit.log') } }, kubernetes: { kubeconfig: down, watch: false }, schedule: '0 0 1 1 *', slack: ch }]);
    await handle.firstPolls;
    res = await fetch(`http://127.0.0.1:${handle.port}/readyz`);
    raw = await res.text();
    expectNoSecret(raw);
    body = JSON.parse(raw) as typeof body;
    expect(res.status).toBe(503);
    expect(body.serves).toEqual([]);
    expect(body.access[DOWN]!.audit).toMatch(/^audit source: poll failed: .*no-such-audit\.log.*, since 12:00 UTC$/);
    expect(body.access[DOWN]!.slack).toMatch(/^Slack failed to start: /);
  });
});
