import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ConfigError, type ConfigIssue, parseConfig } from '../../src/config/schema.js';
import { loadConfig, resolveConfigPath } from '../../src/config/load.js';
import { maskConfig, maskSecret, renderEffectiveConfig, toFileForm } from '../../src/config/render.js';
import type { Config } from '../../src/config/types.js';

const fixture = (name: string) => join(import.meta.dirname, '../fixtures/config', name);
const repo = (name: string) => join(import.meta.dirname, '../..', name);

const BOT = 'xoxb-1111111111-2222222222222-AbCdEfGhIjKlMnOpQrStUvWx';
const APP = 'xapp-1-A0123456789-3333333333333-0123456789abcdef0123456789abcdef';
const SIGNING = '8f742231b10e8888abcd99yyyzzz85a5';

/** Issues of a ConfigError as `path → message` strings, sorted, for exact comparison. */
function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.issues.map((i: ConfigIssue) => `${i.path.join('.')}${i.line === undefined ? '' : `:${i.line}`} → ${i.message}`).sort();
  }
  throw new Error('expected a ConfigError');
}

const fileCluster = { name: 'dev', audit: { file: { path: '/var/log/audit.log' } } };

describe('parseConfig defaults', () => {
  it('fills every default for a minimal file', () => {
    const config = loadConfig(fixture('minimal.yaml'), {});
    const expected: Config = {
      store: { path: './data/tokenwatch.db' },
      shards: { heartbeat: 5_000, ttl: 15_000 },
      http: { host: '0.0.0.0', port: 8080 },
      log: { level: 'info' },
      remediation: { rolloutTimeout: 600_000, settlePeriod: 7_200_000 },
      poll: { jitter: 10_000, chunkEvents: 10_000, requestTimeout: 10_000, spread: true, concurrency: 10, cloudwatchTps: { filterLogEvents: 5, startQuery: 5, getQueryResults: 5 }, cloudwatchFleetInsights: { enabled: false, maxLogGroupsPerQuery: 50, maxConcurrentQueries: 10, reuse: 300_000 }, gcpLogging: { readsPerMinute: 60, reuse: 300_000 }, logAnalytics: { queriesPerSecond: 5, maxConcurrentQueries: 5, reuse: 300_000, timeout: 300_000 } },
      findings: { activeWindow: 3_600_000, quietPeriod: 86_400_000, readinessMinWindow: 7 * 86_400_000 },
      retention: { tokenRecords: 7 * 86_400_000, pollRuns: 7 * 86_400_000, actionLog: 90 * 86_400_000 },
      clusters: [
        {
          name: 'dev',
          audit: { file: { path: '/var/log/audit.log' } },
          kubernetes: { none: true },
          maxTokenAge: { mode: 'eks' },
          schedule: '*/5 * * * *',
          lookback: 86_400_000,
          trustedProxies: [],
          thresholds: { criticalDays: 7, warningDays: 30, inferred401CriticalRequests: 10 },
          blindLog: { silentAfter: 3_600_000, silentPolls: 6 },
        },
      ],
    };
    expect(config).toEqual(expected);
  });

  it('fills CloudWatch and Slack defaults, logGroup from the cluster name', () => {
    const config = parseConfig(
      {
        slack: { enabled: true },
        clusters: [
          {
            name: 'prod',
            audit: { cloudwatch: { region: 'eu-west-1' } },
            slack: { channel: 'C0AAA', approvers: ['U0AAA'] },
          },
        ],
      },
      { SLACK_BOT_TOKEN: BOT, SLACK_APP_TOKEN: APP },
    );
    expect(config.slack).toEqual({
      enabled: true,
      mode: 'socket',
      host: '0.0.0.0',
      port: 3000,
      approvals: { expiresAfter: 1_800_000, reminders: true, notifyRequester: true },
      commands: { scanInterval: 120_000 },
      botToken: BOT,
      appToken: APP,
    });
    expect(config.clusters[0]!.audit).toEqual({
      cloudwatch: {
        region: 'eu-west-1',
        logGroup: '/aws/eks/prod/cluster',
        streamPrefix: 'kube-apiserver-audit-',
        mode: 'filter',
        overlap: 600_000,
      },
    });
    expect(config.clusters[0]!.slack).toEqual({
      channel: 'C0AAA',
      approvers: ['U0AAA'],
      allowSelfApproval: false,
      protectedApprovals: 2,
      actions: ['restart', 'recreate-serviceaccount', 'snooze'],
    });
  });

  it('takes the default logGroup from the EKS cluster name and regions from AWS_REGION', () => {
    const config = parseConfig(
      { clusters: [{ name: 'prod', audit: { cloudwatch: {} }, kubernetes: { eks: { clusterName: 'Prod_Cluster-1' } } }] },
      { AWS_REGION: 'ap-southeast-2' },
    );
    expect(config.clusters[0]!.audit).toMatchObject({
      cloudwatch: { region: 'ap-southeast-2', logGroup: '/aws/eks/Prod_Cluster-1/cluster' },
    });
    expect(config.clusters[0]!.kubernetes).toEqual({ eks: { clusterName: 'Prod_Cluster-1', region: 'ap-southeast-2' } });
    const viaDefault = parseConfig({ clusters: [{ name: 'p', audit: { cloudwatch: {} } }] }, { AWS_DEFAULT_REGION: 'us-gov-west-1' });
    expect(viaDefault.clusters[0]!.audit).toMatchObject({ cloudwatch: { region: 'us-gov-west-1' } });
  });

  it('normalises the kubernetes forms', () => {
    const forms = [
      [{ inCluster: true }, { inCluster: true }],
      [{ kubeconfig: '/k' }, { kubeconfig: '/k' }],
      [{ context: 'c' }, { context: 'c' }],
      [{ kubeconfig: '/k', context: 'c' }, { kubeconfig: '/k', context: 'c' }],
      [{ none: true }, { none: true }],
    ] as const;
    for (const [input, output] of forms) {
      const config = parseConfig({ clusters: [{ ...fileCluster, kubernetes: input }] }, {});
      expect(config.clusters[0]!.kubernetes).toEqual(output);
    }
  });

  it('kubernetes.secretMetadata: off unless asked for, kept on every access form, refused with none', () => {
    for (const [input, output] of [
      [{ inCluster: true, secretMetadata: true }, { inCluster: true, secretMetadata: true }],
      [{ inCluster: true, secretMetadata: false }, { inCluster: true }],
      [{ kubeconfig: '/k', secretMetadata: true }, { kubeconfig: '/k', secretMetadata: true }],
      [{ eks: { clusterName: 'prod', region: 'us-east-1' }, secretMetadata: true }, { eks: { clusterName: 'prod', region: 'us-east-1' }, secretMetadata: true }],
    ] as const) {
      expect(parseConfig({ clusters: [{ ...fileCluster, kubernetes: input }] }, {}).clusters[0]!.kubernetes).toEqual(output);
    }
    expect(() => parseConfig({ clusters: [{ ...fileCluster, kubernetes: { none: true, secretMetadata: true } }] }, {})).toThrow(
      /needs cluster access \(inCluster, kubeconfig\/context or eks\), not none\n {2}→ at clusters\[0\]\.kubernetes\.secretMetadata/,
    );
    expect(() => parseConfig({ clusters: [{ ...fileCluster, kubernetes: { inCluster: true, secretMetadata: 'yes' } }] }, {})).toThrow(/secretMetadata/);
  });

  it('kubernetes.watch: on unless turned off (only false is kept), on every access form, refused with none', () => {
    for (const [input, output] of [
      [{ inCluster: true }, { inCluster: true }],
      [{ inCluster: true, watch: true }, { inCluster: true }],
      [{ inCluster: true, watch: false }, { inCluster: true, watch: false }],
      [{ kubeconfig: '/k', watch: false, secretMetadata: true }, { kubeconfig: '/k', secretMetadata: true, watch: false }],
      [{ eks: { clusterName: 'prod', region: 'us-east-1' }, watch: false }, { eks: { clusterName: 'prod', region: 'us-east-1' }, watch: false }],
    ] as const) {
      expect(parseConfig({ clusters: [{ ...fileCluster, kubernetes: input }] }, {}).clusters[0]!.kubernetes).toEqual(output);
    }
    expect(() => parseConfig({ clusters: [{ ...fileCluster, kubernetes: { none: true, watch: false } }] }, {})).toThrow(
      /needs cluster access \(inCluster, kubeconfig\/context or eks\), not none\n {2}→ at clusters\[0\]\.kubernetes\.watch/,
    );
    expect(() => parseConfig({ clusters: [{ ...fileCluster, kubernetes: { inCluster: true, watch: 'no' } }] }, {})).toThrow(/watch/);
  });

  it.each([
    ['eks', { mode: 'eks' }],
    ['upstream', { mode: 'upstream' }],
    [7_776_000, { mode: 'seconds', seconds: 7_776_000 }],
    ['86400', { mode: 'seconds', seconds: 86_400 }],
    ['90d', { mode: 'seconds', seconds: 7_776_000 }],
  ])('maxTokenAge %j', (input, output) => {
    expect(parseConfig({ clusters: [{ ...fileCluster, maxTokenAge: input }] }, {}).clusters[0]!.maxTokenAge).toEqual(output);
  });

  it.each([0, -5, 1.5, '1.5d', '1500ms', 'forever', true])('maxTokenAge %j is rejected', (input) => {
    expect(issuesOf(() => parseConfig({ clusters: [{ ...fileCluster, maxTokenAge: input }] }, {}))).toEqual([
      'clusters.0.maxTokenAge → expected "eks" (90 days), "upstream" (1 year), a number of seconds, or a duration such as "90d"',
    ]);
  });

  it('lets LOG_LEVEL override log.level, and validates it', () => {
    expect(parseConfig({ log: { level: 'warn' }, clusters: [fileCluster] }, { LOG_LEVEL: 'debug' }).log.level).toBe('debug');
    expect(parseConfig({ log: { level: 'warn' }, clusters: [fileCluster] }, { LOG_LEVEL: '' }).log.level).toBe('warn');
    expect(issuesOf(() => parseConfig({ clusters: [fileCluster] }, { LOG_LEVEL: 'loud' }))).toEqual([
      'env.LOG_LEVEL → expected one of trace, debug, info, warn, error, fatal, silent',
    ]);
  });

  it('poll.spread, poll.concurrency and poll.cloudwatchTps: defaults, overrides and bounds', () => {
    const poll = (p: unknown) => parseConfig({ poll: p, clusters: [fileCluster] }, {}).poll;
    expect(poll({ spread: false, concurrency: 50, cloudwatchTps: { filterLogEvents: 2.5 } })).toMatchObject({
      spread: false,
      concurrency: 50,
      cloudwatchTps: { filterLogEvents: 2.5, startQuery: 5, getQueryResults: 5 }, // the AWS quotas, 5 TPS each
    });
    const issues = (p: unknown) => issuesOf(() => parseConfig({ poll: p, clusters: [fileCluster] }, {}));
    expect(issues({ concurrency: 0 })[0]).toMatch(/^poll\.concurrency → /);
    expect(issues({ concurrency: 2.5 })[0]).toMatch(/^poll\.concurrency → .*int/i);
    expect(issues({ cloudwatchTps: { filterLogEvents: 0 } })[0]).toMatch(/^poll\.cloudwatchTps\.filterLogEvents → /);
    expect(issues({ cloudwatchTps: { filterLogEvent: 5 } })).toHaveLength(1); // a misspelt key is refused (strict)
  });

  it('shards.heartbeat and shards.ttl: 5 s and 15 s by default, at least 1 s, the TTL at least twice the heartbeat', () => {
    const shards = (v: unknown) => parseConfig({ shards: v, clusters: [fileCluster] }, {}).shards;
    expect(shards(undefined)).toEqual({ heartbeat: 5_000, ttl: 15_000 });
    expect(shards({ heartbeat: '1s', ttl: '2s' })).toEqual({ heartbeat: 1_000, ttl: 2_000 });
    expect(shards({ heartbeat: '10s', ttl: '30s' })).toEqual({ heartbeat: 10_000, ttl: 30_000 });
    const issues = (v: unknown) => issuesOf(() => parseConfig({ shards: v, clusters: [fileCluster] }, {}));
    expect(issues({ heartbeat: '5s', ttl: '9s' })).toEqual(['shards.ttl → must be at least twice shards.heartbeat (5s), got 9s: one late heartbeat would hand the clusters over']);
    expect(issues({ heartbeat: '10s' })).toEqual(['shards.ttl → must be at least twice shards.heartbeat (10s), got 15s: one late heartbeat would hand the clusters over']);
    expect(issues({ heartbeat: '500ms' })[0]).toMatch(/^shards\.heartbeat → must be at least 1s/);
    expect(issues({ heartbeat: 5 })[0]).toMatch(/^shards\.heartbeat → /);
    expect(issues({ ttl: '1m', heartbeats: '5s' })).toHaveLength(1); // a misspelt key is refused (strict)
  });

  it('poll.cloudwatchFleetInsights: off by default, at most 50 log groups per query (StartQuery) and 30 concurrent queries (the account quota)', () => {
    const poll = (p: unknown) => parseConfig({ poll: p, clusters: [fileCluster] }, {}).poll;
    expect(poll({ cloudwatchFleetInsights: { enabled: true, maxConcurrentQueries: 4, reuse: '2m' } }).cloudwatchFleetInsights).toEqual({
      enabled: true,
      maxLogGroupsPerQuery: 50,
      maxConcurrentQueries: 4,
      reuse: 120_000,
    });
    const issues = (p: unknown) => issuesOf(() => parseConfig({ poll: p, clusters: [fileCluster] }, {}));
    expect(issues({ cloudwatchFleetInsights: { maxLogGroupsPerQuery: 51 } })[0]).toMatch(/^poll\.cloudwatchFleetInsights\.maxLogGroupsPerQuery → /);
    expect(issues({ cloudwatchFleetInsights: { maxConcurrentQueries: 31 } })[0]).toMatch(/^poll\.cloudwatchFleetInsights\.maxConcurrentQueries → /);
    expect(issues({ cloudwatchFleetInsights: { enable: true } })).toHaveLength(1);
  });

  it('poll.chunkEvents: a whole number from 100 to 1,000,000, default 10,000', () => {
    expect(parseConfig({ poll: { chunkEvents: 25_000 }, clusters: [fileCluster] }, {}).poll).toMatchObject({ jitter: 10_000, chunkEvents: 25_000, requestTimeout: 10_000 });
    const issues = (v: unknown) => issuesOf(() => parseConfig({ poll: { chunkEvents: v }, clusters: [fileCluster] }, {}));
    expect(issues(99)).toHaveLength(1);
    expect(issues(99)[0]).toMatch(/^poll\.chunkEvents → .*100/);
    expect(issues(1_000_001)[0]).toMatch(/^poll\.chunkEvents → .*1000000/);
    expect(issues(500.5)[0]).toMatch(/^poll\.chunkEvents → .*int/i);
    expect(issues('10k')[0]).toMatch(/^poll\.chunkEvents → .*number/);
  });

  it('adds a trailing slash to slack.apiUrl (WebClient slackApiUrl is a base URL)', () => {
    const config = parseConfig({ slack: { apiUrl: 'http://127.0.0.1:9999/api' }, clusters: [fileCluster] }, {});
    expect(config.slack?.apiUrl).toBe('http://127.0.0.1:9999/api/');
  });
});

describe('the example files', () => {
  it('config.example.yaml is valid and documents two clusters', () => {
    const config = loadConfig(repo('config.example.yaml'), { SLACK_BOT_TOKEN: BOT, SLACK_APP_TOKEN: APP });
    expect(config.clusters.map((c) => c.name)).toEqual(['prod-eks', 'staging']);
    expect(config.slack).toMatchObject({ enabled: true, mode: 'socket', approvals: { expiresAfter: 1_800_000 } });
    const [prod, staging] = config.clusters;
    expect(prod!.kubernetes).toEqual({ eks: { clusterName: 'prod-eks', region: 'us-east-1' } });
    expect(prod!.slack?.protectedNamespaces).toEqual(['kube-system']);
    expect(prod!.slack?.namespaces).toEqual({ allow: ['kube-system', 'monitoring*', 'logging'], deny: ['kube-public'] });
    expect(staging!.kubernetes).toEqual({ kubeconfig: '/etc/tokenwatch/staging.kubeconfig', context: 'staging' });
    expect(staging!.maxTokenAge).toEqual({ mode: 'upstream' });
  });

  it('config.example.yaml lists every field of the schema', () => {
    // every key that the effective config of the example has must be written in the example itself
    const config = loadConfig(repo('config.example.yaml'), { SLACK_BOT_TOKEN: BOT, SLACK_APP_TOKEN: APP });
    const text = renderEffectiveConfig(config);
    const exampleText = parseYaml(text) as unknown;
    const keys = new Set<string>();
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (typeof v === 'object' && v !== null) for (const [k, x] of Object.entries(v)) {
        keys.add(k);
        walk(x);
      }
    };
    walk(exampleText);
    const source = readFileSync(repo('config.example.yaml'), 'utf8');
    for (const k of [...keys, 'apiUrl', 'endpoint', 'inCluster', 'none']) expect(source).toContain(`${k}:`);
  });

  it('examples/serve.yaml runs the bundled example without Slack or cluster access', () => {
    const config = loadConfig(repo('examples/serve.yaml'), {});
    expect(config.store.path).toBe('./data/tokenwatch.db');
    expect(config.slack?.enabled).toBe(false);
    expect(config.clusters).toEqual([
      {
        name: 'prod-eks',
        audit: { file: { path: 'examples/audit/kube-apiserver-audit.log' } },
        kubernetes: { none: true },
        maxTokenAge: { mode: 'eks' },
        schedule: '*/5 * * * *',
        lookback: 86_400_000,
        trustedProxies: [],
        thresholds: { criticalDays: 7, warningDays: 30, inferred401CriticalRequests: 10 },
        blindLog: { silentAfter: 3_600_000, silentPolls: 6 },
      },
    ]);
  });
});

describe('errors', () => {
  it('reports every wrong field of a file at once, with paths and lines', () => {
    expect(issuesOf(() => loadConfig(fixture('invalid-many.yaml'), {}))).toEqual([
      'clusters.0.audit.cloudwatch.overlap:15 → expected a duration string such as "10m", "24h" or "7d" (units ms, s, m, h, d, w)',
      'clusters.0.maxTokenAge:17 → expected "eks" (90 days), "upstream" (1 year), a number of seconds, or a duration such as "90d"',
      'clusters.0.name:11 → expected a DNS-1123 label: lowercase letters, digits and "-", at most 63 characters',
      'clusters.0.schedule:16 → invalid cron expression "61 * * * *": 61 is not a valid minute value',
      'clusters.0.slack.approvers.0:20 → expected a Slack user id (U…, W…) or user group id (S…)',
      'clusters.1.audit:22 → expected exactly one of cloudwatch, file, webhook, gcp, none, azure (got cloudwatch, file)',
      'clusters.1.thresholds:27 → criticalDays (30) must be less than warningDays (7)',
      'clusters.2.name:30 → duplicate cluster name "staging" (also clusters[1])',
      'env.SLACK_APP_TOKEN → required when slack.mode is socket',
      'env.SLACK_BOT_TOKEN → required when slack.enabled is true',
      'http.port:4 → Too big: expected number to be <=65535',
      'log.level:6 → Invalid option: expected one of "trace"|"debug"|"info"|"warn"|"error"|"fatal"|"silent"',
      'stor:1 → unknown key',
    ]);
  });

  it('puts all of them in one message, in zod prettifyError form', () => {
    let message = '';
    try {
      loadConfig(fixture('invalid-many.yaml'), {});
    } catch (err) {
      message = (err as Error).message;
      expect((err as ConfigError).exitCode).toBe(2);
    }
    expect(message.split('\n')[0]).toBe(`invalid configuration in ${fixture('invalid-many.yaml')} (13 problems):`);
    expect(message).toContain('✖ unknown key (line 1)\n  → at stor');
    expect(message).toContain('✖ Too big: expected number to be <=65535 (line 4)\n  → at http.port');
    expect(message).toContain('✖ required when slack.enabled is true\n  → at env.SLACK_BOT_TOKEN');
    expect(message).toContain('  → at clusters[0].audit.cloudwatch.overlap');
    expect(message).toContain('  → at clusters[2].name');
    expect(message.match(/✖/g)).toHaveLength(13);
  });

  it('reports YAML syntax errors with lines', () => {
    expect(issuesOf(() => loadConfig(fixture('malformed.yaml'), {}))).toEqual([
      ':4 → YAML BAD_INDENT: All mapping items must start at the same column',
      ':4 → YAML BAD_INDENT: Flow map in block collection must be sufficiently indented and end with a }',
      ':5 → YAML BAD_INDENT: Flow sequence in block collection must be sufficiently indented and end with a ]',
    ]);
    expect(issuesOf(() => loadConfig(fixture('duplicate-keys.yaml'), {}))).toEqual([':3 → YAML DUPLICATE_KEY: Map keys must be unique']);
  });

  it('refuses an alias bomb instead of expanding it', () => {
    expect(issuesOf(() => loadConfig(fixture('evil.yaml'), {}))).toEqual([
      ' → YAML: Excessive alias count indicates a resource exhaustion attack',
    ]);
  });

  it('reports an empty file and a missing file', () => {
    expect(issuesOf(() => loadConfig(fixture('empty.yaml'), {}))).toEqual(['clusters → required']);
    expect(issuesOf(() => loadConfig(fixture('does-not-exist.yaml'), {}))).toEqual([' → cannot read config file: ENOENT']);
    expect(issuesOf(() => parseConfig({ clusters: [] }, {}))).toEqual(['clusters → at least one cluster is required']);
    expect(issuesOf(() => parseConfig([1, 2], {}))).toEqual([' → Invalid input: expected object, received array']);
  });

  it('rejects secrets in the file (they come from the environment)', () => {
    expect(issuesOf(() => parseConfig({ slack: { botToken: BOT }, clusters: [fileCluster] }, {}))).toEqual(['slack.botToken → unknown key']);
  });

  it('checks the "exactly one" forms and required regions', () => {
    expect(
      issuesOf(() =>
        parseConfig(
          {
            clusters: [
              { name: 'a', audit: {}, kubernetes: { inCluster: true, eks: { clusterName: 'x' } } },
              { name: 'b', audit: { cloudwatch: {} }, kubernetes: {} },
            ],
          },
          {},
        ),
      ),
    ).toEqual([
      'clusters.0.audit → expected exactly one of cloudwatch, file, webhook, gcp, none, azure (got none)',
      'clusters.0.kubernetes → expected exactly one of inCluster, kubeconfig/context, eks, none (got inCluster, eks)',
      'clusters.0.kubernetes.eks.region → required (or set AWS_REGION)',
      'clusters.1.audit.cloudwatch.region → required (or set AWS_REGION)',
      'clusters.1.kubernetes → expected exactly one of inCluster, kubeconfig/context, eks, none (got none)',
    ]);
  });

  it('checks the Slack cross-field rules', () => {
    const env = { SLACK_BOT_TOKEN: BOT, SLACK_APP_TOKEN: APP };
    expect(issuesOf(() => parseConfig({ clusters: [{ ...fileCluster, slack: { channel: 'C0AAA', approvers: ['U0AAA'] } }] }, env))).toEqual([
      'clusters.0.slack → a cluster slack section needs a top-level slack section (enabled, mode)',
    ]);
    expect(issuesOf(() => parseConfig({ slack: { enabled: true }, clusters: [fileCluster] }, env))).toEqual([
      'slack.enabled → slack is enabled but no cluster has a slack section (channel, approvers)',
    ]);
    expect(
      issuesOf(() =>
        parseConfig(
          {
            slack: { enabled: true },
            clusters: [
              { ...fileCluster, slack: { channel: 'C0AAA' } },
              { ...fileCluster, name: 'dev2', slack: { channel: '#ops', approvers: ['U0AAA'], protectedNamespaces: ['kube-system'] } },
            ],
          },
          env,
        ),
      ),
    ).toEqual([
      'clusters.0.slack.approvers → required (at least one approver) when actions include restart or recreate-serviceaccount',
      'clusters.1.slack.protectedNamespaces → protected namespaces need 2 approvals, but fewer than 2 approvers are configured',
    ]);
    // snooze-only clusters need no approvers; a user group may hold two approvers
    const ok = parseConfig(
      {
        slack: { enabled: true },
        clusters: [
          { ...fileCluster, slack: { channel: 'C0AAA', actions: ['snooze'] } },
          { ...fileCluster, name: 'dev2', slack: { channel: 'C0AAA', approvers: ['S0SRE'], protectedNamespaces: ['kube-system'] } },
        ],
      },
      env,
    );
    expect(ok.clusters[0]!.slack?.approvers).toEqual([]);
  });
});

describe('Slack secrets from the environment', () => {
  const base = (mode: 'socket' | 'http') => ({
    slack: { enabled: true, mode },
    clusters: [{ ...fileCluster, slack: { channel: 'C0AAA', approvers: ['U0AAA'] } }],
  });

  it('socket mode needs the bot token and the app token', () => {
    expect(issuesOf(() => parseConfig(base('socket'), {}))).toEqual([
      'env.SLACK_APP_TOKEN → required when slack.mode is socket',
      'env.SLACK_BOT_TOKEN → required when slack.enabled is true',
    ]);
    expect(issuesOf(() => parseConfig(base('socket'), { SLACK_BOT_TOKEN: APP, SLACK_APP_TOKEN: BOT, SLACK_SIGNING_SECRET: '' }))).toEqual([
      'env.SLACK_APP_TOKEN → must be an app-level token starting with "xapp-"',
      'env.SLACK_BOT_TOKEN → must be a bot token starting with "xoxb-"',
    ]);
    const config = parseConfig(base('socket'), { SLACK_BOT_TOKEN: BOT, SLACK_APP_TOKEN: APP });
    expect([config.slack?.botToken, config.slack?.appToken, config.slack?.signingSecret]).toEqual([BOT, APP, undefined]);
  });

  it('http mode needs the bot token and the signing secret', () => {
    expect(issuesOf(() => parseConfig(base('http'), { SLACK_APP_TOKEN: APP }))).toEqual([
      'env.SLACK_BOT_TOKEN → required when slack.enabled is true',
      'env.SLACK_SIGNING_SECRET → required when slack.mode is http',
    ]);
    expect(issuesOf(() => parseConfig(base('http'), { SLACK_BOT_TOKEN: BOT, SLACK_SIGNING_SECRET: 'short' }))).toEqual([
      'env.SLACK_SIGNING_SECRET → too short to be a Slack signing secret',
    ]);
    const config = parseConfig(base('http'), { SLACK_BOT_TOKEN: BOT, SLACK_SIGNING_SECRET: SIGNING });
    expect(config.slack?.signingSecret).toBe(SIGNING);
  });

  it('needs no secrets when Slack is disabled', () => {
    const config = parseConfig({ ...base('http'), slack: { enabled: false, mode: 'http' } }, {});
    expect(config.slack?.enabled).toBe(false);
  });

  it('never puts a secret value in an error message', () => {
    try {
      parseConfig(base('socket'), { SLACK_BOT_TOKEN: 'xoxp-user-token-secret-value', SLACK_APP_TOKEN: 'bad-app-token-secret-value' });
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).not.toContain('secret-value');
    }
  });
});

describe('masking and rendering', () => {
  it.each([
    [BOT, 'xoxb-****UvWx'],
    [APP, 'xapp-****cdef'],
    [SIGNING, '****85a5'],
    ['xoxb-short', 'xoxb-****'],
    ['tiny', '****'],
  ])('maskSecret(%s) = %s', (secret, masked) => {
    expect(maskSecret(secret)).toBe(masked);
  });

  const full = () =>
    parseConfig(
      {
        slack: { enabled: true, mode: 'http', apiUrl: 'https://bot:hunter2@slack.example.com/api/' },
        clusters: [
          {
            name: 'prod',
            audit: { cloudwatch: { region: 'us-east-1', endpoint: 'https://u:pw-secret@logs.example.com', overlap: '1h30m' } },
            kubernetes: { kubeconfig: '/k', context: 'c' },
            maxTokenAge: 86_400,
            lookback: '36h',
            slack: { channel: 'C0AAA', approvers: ['U0AAA', 'S0BBB'], namespaces: { deny: ['kube-public'] } },
          },
        ],
      },
      { SLACK_BOT_TOKEN: BOT, SLACK_SIGNING_SECRET: SIGNING, SLACK_APP_TOKEN: APP },
    );

  it('maskConfig masks every secret and leaves the original intact', () => {
    const config = full();
    const masked = maskConfig(config);
    expect(masked.slack).toMatchObject({
      botToken: 'xoxb-****UvWx',
      appToken: 'xapp-****cdef',
      signingSecret: '****85a5',
      apiUrl: 'https://bot:****@slack.example.com/api/',
    });
    expect(masked.clusters[0]!.audit).toMatchObject({ cloudwatch: { endpoint: 'https://u:****@logs.example.com/' } });
    expect(config.slack?.botToken).toBe(BOT);
    expect(config.slack?.apiUrl).toBe('https://bot:hunter2@slack.example.com/api/');
  });

  it('renders YAML without secrets that parses back to the same config', () => {
    const config = full();
    const text = renderEffectiveConfig(config);
    for (const secret of [BOT, APP, SIGNING, 'hunter2', 'pw-secret']) expect(text).not.toContain(secret);
    expect(text).toContain('#   SLACK_BOT_TOKEN: xoxb-****UvWx\n');
    expect(text).toContain('#   SLACK_SIGNING_SECRET: ****85a5\n');
    expect(text).toContain('overlap: 1h30m');
    expect(text).toContain('lookback: 1d12h');
    expect(text).toContain('maxTokenAge: 86400');
    // the file form of the unmasked config is a valid config file giving the same config
    const again = parseConfig(toFileForm(config), { SLACK_BOT_TOKEN: BOT, SLACK_SIGNING_SECRET: SIGNING, SLACK_APP_TOKEN: APP });
    expect(again).toEqual(config);
    expect(parseYaml(text)).toEqual(toFileForm(maskConfig(config)));
  });
});

describe('resolveConfigPath', () => {
  it('prefers --config, then TOKENWATCH_CONFIG, else says what to do', () => {
    expect(resolveConfigPath('a.yaml', { TOKENWATCH_CONFIG: 'b.yaml' })).toBe('a.yaml');
    expect(resolveConfigPath(undefined, { TOKENWATCH_CONFIG: 'b.yaml' })).toBe('b.yaml');
    expect(issuesOf(() => resolveConfigPath(undefined, {}))).toEqual(['--config → required: pass --config FILE or set TOKENWATCH_CONFIG']);
  });

  it('loadConfig reads a file written on the fly', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-config-'));
    const file = join(dir, 'c.yaml');
    writeFileSync(file, 'clusters:\n  - name: x\n    audit: { file: { path: a.log } }\n    schedule: "0 * * * *"\n');
    expect(loadConfig(file, {}).clusters[0]!.schedule).toBe('0 * * * *');
  });
});

describe('namespace patterns', () => {
  const withNs = (patterns: string[]) =>
    parseConfig(
      { slack: {}, clusters: [{ ...fileCluster, slack: { channel: 'C0AAA', approvers: ['U0A', 'U0B'], namespaces: { allow: patterns } } }] },
      {},
    );
  it('accepts names, prefixes ending in * and *', () => {
    expect(withNs(['kube-system', 'kube-*', 'team*', '*']).clusters[0]!.slack?.namespaces?.allow).toEqual(['kube-system', 'kube-*', 'team*', '*']);
  });
  it.each(['Kube-system', 'kube-system-', '*kube', 'ku*be', ''])('rejects %j', (p) => {
    expect(issuesOf(() => withNs([p]))).toEqual([
      'clusters.0.slack.namespaces.allow.0 → expected a namespace name, or a prefix ending in * (kube-*)',
    ]);
  });
});

describe('audit.webhook', () => {
  const cluster = (webhook: Record<string, unknown>) => ({ clusters: [{ name: 'prod', audit: { webhook } }], store: { path: '/var/lib/tw/tw.db' } });
  it('fills defaults: listener 0.0.0.0:8443, 16 MiB bodies, 256 MiB spool next to the store', () => {
    const c = parseConfig(cluster({ certFile: '/tls/crt', keyFile: '/tls/key', tokenFile: '/tok' }), {});
    expect(c.clusters[0]!.audit).toEqual({
      webhook: { host: '0.0.0.0', port: 8443, certFile: '/tls/crt', keyFile: '/tls/key', tokenFile: '/tok', maxBodyBytes: 16777216, maxSpoolBytes: 268435456, maxInflightBytes: 67108864, maxConnections: 256, spool: '/var/lib/tw/webhook-prod.spool' },
    });
  });
  it('needs client authentication, and one token form only', () => {
    expect(issuesOf(() => parseConfig(cluster({ certFile: '/c', keyFile: '/k' }), {}))).toEqual([
      'clusters.0.audit.webhook → needs client authentication: tokenFile, tokenEnv or clientCaFile',
    ]);
    expect(issuesOf(() => parseConfig(cluster({ certFile: '/c', keyFile: '/k', tokenFile: '/t', tokenEnv: 'TW_TOKEN' }), {}))).toEqual([
      'clusters.0.audit.webhook → tokenFile and tokenEnv are exclusive',
    ]);
    expect(issuesOf(() => parseConfig(cluster({ keyFile: '/k', clientCaFile: '/ca' }), {}))).toEqual(['clusters.0.audit.webhook.certFile → required']);
  });
});

