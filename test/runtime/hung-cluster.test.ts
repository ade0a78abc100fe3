/**
 * One hung cluster among healthy ones, end to end (`serve` + Slack harness): its Kubernetes API server is a loopback
 * black hole (accepts TCP connections, never answers). The healthy clusters poll on while its poll hangs; it shows
 * degraded in `/readyz`, `/tokens status` and the metrics; a poll still running past 3 × `poll.requestTimeout` shows
 * as slow; `stop()` (SIGTERM) aborts the running poll and does not record it as a failure.
 */
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER, REQUESTER, blockText, startHarness, type Harness } from '../slack/harness.js';

const HUNG = 'hung-eks';
let blackHole: Server;
const sockets = new Set<Socket>();
let hungKubeconfig: string;
let hungAudit: string;

beforeAll(async () => {
  blackHole = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => blackHole.listen(0, '127.0.0.1', r));
  const { port } = blackHole.address() as { port: number };
  const dir = mkdtempSync(join(tmpdir(), 'tw-hung-'));
  hungKubeconfig = join(dir, 'kubeconfig.yaml');
  writeFileSync(
    hungKubeconfig,
    `apiVersion: v1
kind: Config
clusters:
- name: hung
  cluster:
    server: http://127.0.0.1:${port}
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: hung-secret-token-value
contexts:
- name: hung
  context:
    cluster: hung
    user: u
current-context: hung
`,
  );
  hungAudit = join(dir, 'audit.log');
  copyFileSync('examples/audit/kube-apiserver-audit.log', hungAudit); // stale-token findings: their pods are looked up
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => blackHole.close(() => r()));
});

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await sleep(20);
}

describe('a hung cluster among healthy ones (serve)', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.stop();
    h = undefined;
  });

  it('shows degraded, never healthy; the others poll on; stop aborts its poll', { timeout: 120_000 }, async () => {
    const logs: Array<Record<string, unknown>> = [];
    h = await startHarness({
      logs,
      tweak: (c) => {
        c.poll.requestTimeout = 1_000;
        const base = c.clusters[0]!;
        c.clusters.push({ ...base, name: HUNG, audit: { file: { path: hungAudit } }, kubernetes: { kubeconfig: hungKubeconfig } });
      },
    });
    const serve = h.serve;
    const rt = serve.context.clusters.get(HUNG)!;
    // First polls are done (the harness waited for them): the Kubernetes reads of the hung cluster timed out.
    // staging-eks alerts in a channel the bot is not in: its Slack access fails (the health model), so it is not ok either.
    expect(serve.readiness().polls).toEqual({ [CLUSTER]: 'ok', 'staging-eks': 'degraded', [HUNG]: 'degraded' });
    expect(serve.readiness().access[HUNG]!.kubernetes).toMatch(/^Kubernetes API (not answering|unreachable): .*, since 12:00 UTC$/);
    expect(rt.poller.health().lastError).toMatch(/^Kubernetes API not answering: .*timed out after 1000 ms/);
    expect(sockets.size).toBeGreaterThan(0); // it connected: a hang, not a refusal
    let text = await h.metrics.text();
    expect(text).toContain(`tokenwatch_poll_failing{cluster="${HUNG}"} 1`);
    expect(text).toContain(`tokenwatch_poll_failing{cluster="${CLUSTER}"} 0`);

    await h.command(`status ${HUNG}`, REQUESTER);
    let status = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(status).toContain('❌ audit source');
    expect(status).toContain('Kubernetes API not answering');
    expect(status).not.toContain('hung-secret-token-value');

    // A poll of the hung cluster runs; a healthy cluster's poll starts and finishes meanwhile.
    expect(serve.context.runNow(HUNG)).toBe('started');
    await until(() => rt.poller.health().runningSince !== undefined);
    expect(serve.context.runNow(CLUSTER)).toBe('started');
    await serve.context.scheduler.current(CLUSTER);
    expect(serve.context.scheduler.isBusy(HUNG)).toBe(true);
    expect(serve.context.clusters.get(CLUSTER)!.poller.health().status).toBe('ok');

    // The service clock moves 10 s on (past 3 × the 1 s request timeout) while that poll still runs: slow.
    h.advance(10_000);
    const slow = rt.poller.health();
    expect(slow.status).toBe('degraded');
    expect(slow.slow?.forMs).toBeGreaterThanOrEqual(10_000);
    await h.command(`status ${HUNG}`, REQUESTER);
    status = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(status).toMatch(/degraded: a poll has been running for 1\d s \(since 2026-11-20T12:0/);
    text = await h.metrics.text();
    const running = Number(new RegExp(`tokenwatch_poll_running_seconds\\{cluster="${HUNG}"\\} ([\\d.]+)`).exec(text)?.[1]);
    expect(running).toBeGreaterThanOrEqual(10);
    expect(text).toContain(`tokenwatch_poll_running_seconds{cluster="${CLUSTER}"} 0`);

    // SIGTERM: the running poll is aborted at once (not waited out) and not recorded as a failed poll.
    const errorsBefore = text.match(new RegExp(`tokenwatch_polls_total\\{cluster="${HUNG}",outcome="error"\\} (\\d+)`))?.[1];
    await h.stop({ keepFakes: true });
    expect(serve.context.scheduler.isBusy(HUNG)).toBe(false);
    expect(logs.filter((l) => l.cluster === HUNG && l.msg === 'poll aborted; the next poll reads on from the last committed chunk')).toHaveLength(1);
    text = await h.metrics.text();
    expect(text.match(new RegExp(`tokenwatch_polls_total\\{cluster="${HUNG}",outcome="error"\\} (\\d+)`))?.[1]).toBe(errorsBefore);
    await h.slack.close();
    await h.kube.close();
    h = undefined;
  });
});
