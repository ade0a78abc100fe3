import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import { startHealthServer, type ReadinessBody } from '../../src/runtime/health-server.js';
import { auditEvent } from '../sources/events.js';
import { cliMain } from '../support/build.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');

describe('composeServe', () => {
  it('polls every cluster at start, persists findings, serves /healthz /readyz /metrics, and stops cleanly', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-serve-'));
    const log = join(dir, 'audit.log');
    writeFileSync(log, [1, 2, 3].map((i) => auditEvent({ auditID: `s${i}`, time: T0 + i * 1000, kind: 'stale', pod: 'kube-multus-ds-aaaaa', secondsAfterWarning: 7_200_000 + i })).join('\n') + '\n');
    const config = parseConfig(
      {
        store: { path: join(dir, 'db', 'tw.db') },
        http: { host: '127.0.0.1', port: 0 },
        clusters: [
          { name: 'prod', audit: { file: { path: log } } },
          { name: 'broken', audit: { file: { path: join(dir, 'missing.log') } } },
        ],
      },
      {},
    );
    const metrics = new Metrics();
    const handle = await composeServe(config, { logger: createLogger({ level: 'silent' }), metrics, jitterMs: 0, clock: () => T0 + 10_000 });
    try {
      await handle.firstPolls;
      const base = `http://127.0.0.1:${handle.port}`;
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      const ready = await fetch(`${base}/readyz`);
      expect(ready.status).toBe(200);
      // The health model: each access of each cluster in words, the failure with the time it started.
      expect(await ready.json()).toEqual({
        status: 'ready',
        serves: ['polls'],
        polls: { prod: 'ok', broken: 'degraded' },
        access: {
          prod: { audit: 'audit source: ok', kubernetes: 'Kubernetes API: not used (kubernetes: none)', watchCache: 'watch cache: not used (kubernetes: none)', slack: 'Slack: not used (Slack not enabled)' },
          broken: {
            audit: expect.stringMatching(/^audit source: poll failed: .*missing\.log.*, since 12:00 UTC$/),
            kubernetes: 'Kubernetes API: not used (kubernetes: none)',
            watchCache: 'watch cache: not used (kubernetes: none)',
            slack: 'Slack: not used (Slack not enabled)',
          },
        },
        integrations: {},
        blind: {},
      });
      const metricsText = await (await fetch(`${base}/metrics`)).text();
      expect(metricsText).toContain('tokenwatch_access_failing{cluster="broken",access="audit"} 1');
      expect(metricsText).toContain('tokenwatch_access_failing{cluster="prod",access="audit"} 0');
      const text = await (await fetch(`${base}/metrics`)).text();
      expect(text).toContain('tokenwatch_polls_total{cluster="prod",outcome="ok"} 1');
      expect(text).toContain('tokenwatch_polls_total{cluster="broken",outcome="error"} 1');
      expect(text).toContain('tokenwatch_open_findings{cluster="prod",severity="critical"} 1');
      expect((await fetch(`${base}/nope`)).status).toBe(404);
      const stored = await handle.context.store.findings.list('prod');
      expect(stored).toHaveLength(1);
      expect(handle.context.clusters.get('prod')!.poller.health().status).toBe('ok');
      expect(handle.context.clusters.get('broken')!.poller.health()).toMatchObject({ status: 'degraded', lastError: expect.stringContaining('missing.log') });
    } finally {
      await handle.stop();
    }
    await expect(fetch(`http://127.0.0.1:${handle.port}/healthz`)).rejects.toThrow();
  });
});

describe('tokenwatch serve (CLI)', () => {
  it('an invalid config exits 2 and names every wrong field', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-serve-cli-'));
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'http:\n  port: 99999\nclusters:\n  - name: Bad_Name\n    audit: {}\n    schedule: "every minute"\n');
    const r = spawnSync(process.execPath, [cliMain(), 'serve', '--config', bad], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('http.port');
    expect(r.stderr).toContain('clusters[0].name');
    expect(r.stderr).toContain('clusters[0].audit');
    expect(r.stderr).toContain('clusters[0].schedule');
  });
});

describe('composeServe with a failing integration', () => {
  it('keeps polling without it (no crash loop on a revoked Slack token) and says why on /readyz', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-serve-fail-'));
    const log = join(dir, 'audit.log');
    writeFileSync(log, auditEvent({ auditID: 'x1', time: T0, kind: 'stale', secondsAfterWarning: 100 }) + '\n');
    const config = parseConfig({ store: { path: join(dir, 'tw.db') }, http: { host: '127.0.0.1', port: 0 }, clusters: [{ name: 'prod', audit: { file: { path: log } } }] }, {});
    const handle = await composeServe(config, {
      logger: createLogger({ level: 'silent' }),
      jitterMs: 0,
      clock: () => T0,
      integrations: [async () => { throw new Error('slack auth.test failed: invalid_auth'); }],
    });
    try {
      await handle.firstPolls;
      expect(await handle.context.store.findings.list('prod')).toHaveLength(1);
      const ready = await fetch(`http://127.0.0.1:${handle.port}/readyz`);
      expect(ready.status).toBe(200);
      // Slack is an access the poll needs (its alerts go nowhere): the cluster is not ok, and says why.
      expect(await ready.json()).toEqual({
        status: 'ready',
        serves: ['polls'],
        polls: { prod: 'degraded' },
        access: { prod: expect.objectContaining({ audit: 'audit source: ok', slack: 'Slack failed to start: slack auth.test failed: invalid_auth, since 12:00 UTC' }) },
        integrations: { slack: 'failed' },
        blind: {},
      });
    } finally {
      await handle.stop();
    }
  });

  it('poll.jitter from the config spreads scheduled polls (default 10 s); the option overrides it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-jitter-'));
    const log = join(dir, 'audit.log');
    writeFileSync(log, '');
    const base = { store: { path: join(dir, 'tw.db') }, http: { host: '127.0.0.1', port: 0 }, clusters: [{ name: 'prod', audit: { file: { path: log } }, schedule: '0 0 1 1 *' }] };
    expect(parseConfig(base, {}).poll.jitter).toBe(10_000);
    const config = parseConfig({ ...base, poll: { jitter: '0s' } }, {});
    expect(config.poll.jitter).toBe(0);
    const handle = await composeServe(config, { logger: createLogger({ level: 'silent' }), metrics: new Metrics() });
    try {
      expect(handle.context.scheduler.jitterMs).toBe(0);
      await handle.firstPolls; // no jitter: the first poll runs at once
    } finally {
      await handle.stop();
    }
    const overridden = await composeServe(parseConfig({ ...base, poll: { jitter: '30s' } }, {}), { logger: createLogger({ level: 'silent' }), metrics: new Metrics(), jitterMs: 0 });
    try {
      expect(overridden.context.scheduler.jitterMs).toBe(0);
    } finally {
      await overridden.stop();
    }
  });
});

describe('tokenwatch serve --help', () => {
  it('lists the environment variables serve reads, the signing secret check, and points to .env.example', async () => {
    const { runCli } = await import('../cli/run-cli.js');
    const run = await runCli(['serve', '--help']);
    expect(run.code).toBe(0);
    for (const name of ['TOKENWATCH_CONFIG', 'LOG_LEVEL', 'SLACK_BOT_TOKEN', 'SLACK_APP_TOKEN', 'SLACK_SIGNING_SECRET', 'AWS_REGION', 'AWS_DEFAULT_REGION', 'AWS_PROFILE', 'AWS_ENDPOINT_URL_CLOUDWATCH_LOGS', 'GOOGLE_APPLICATION_CREDENTIALS', 'KUBECONFIG', 'POD_NAME']) {
      expect(run.stdout).toContain(name);
    }
    expect(run.stdout).toContain('see .env.example');
    expect(run.stdout).toContain('at least 16 characters');
  });
});

describe('/readyz and /healthz', () => {
  it('/readyz is 200 while the pod serves something (also with the shared store unavailable), 503 while starting, stopping or serving nothing; /healthz (liveness) is 200 throughout', async () => {
    let status: ReadinessBody['status'] = 'starting';
    let serves: ReadinessBody['serves'] = ['slack'];
    const server = await startHealthServer({ host: '127.0.0.1', port: 0 }, { readiness: () => ({ status, serves, polls: {}, access: {}, integrations: {}, blind: {} }), metrics: new Metrics(), logger: createLogger({ level: 'silent' }) });
    try {
      const codes: Record<string, [number, string, number]> = {};
      const cases = [
        ['starting', ['slack', 'polls']],
        ['ready', ['slack']],
        ['ready', ['audit-webhook']],
        ['ready', ['polls']],
        ['ready', []],
        ['store-unavailable', ['slack']],
        ['store-unavailable', []],
        ['stopping', ['slack', 'polls']],
      ] as const;
      for (const [s, what] of cases) {
        status = s;
        serves = [...what];
        const ready = await fetch(`http://127.0.0.1:${server.port}/readyz`);
        const body = (await ready.json()) as ReadinessBody;
        codes[`${s} serving ${what.join('+') || 'nothing'}`] = [ready.status, body.status, (await fetch(`http://127.0.0.1:${server.port}/healthz`)).status];
      }
      expect(codes).toEqual({
        'starting serving slack+polls': [503, 'starting', 200],
        'ready serving slack': [200, 'ready', 200],
        'ready serving audit-webhook': [200, 'ready', 200],
        'ready serving polls': [200, 'ready', 200],
        'ready serving nothing': [503, 'ready', 200],
        'store-unavailable serving slack': [200, 'store-unavailable', 200],
        'store-unavailable serving nothing': [503, 'store-unavailable', 200],
        'stopping serving slack+polls': [503, 'stopping', 200],
      });
    } finally {
      await server.close();
    }
  });
});
