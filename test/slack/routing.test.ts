import { describe, expect, it } from 'vitest';
import { parseConfig, type Config } from '../../src/config/index.js';
import { toFileForm } from '../../src/config/render.js';
import { ChannelMap } from '../../src/slack/channels.js';
import { keysRulesName, mentions, ownersMention, routeOf, rulesNeedNamespaceLabels, rulesNeedState, type RouteRule, type RouteSubject } from '../../src/slack/routing.js';
import { withOwnersMention } from '../../src/slack/notifier.js';

const ENV = { SLACK_BOT_TOKEN: 'xoxb-test', SLACK_SIGNING_SECRET: 'fake-signing-secret-0123456789abcdef' };

function config(routes: unknown[]): Config {
  return parseConfig(
    {
      slack: { enabled: true, mode: 'http', routes },
      clusters: [
        { name: 'prod-eks', audit: { file: { path: '/tmp/a.log' } }, slack: { channel: 'C0OPS00001', approvers: ['U0APPROVE1'] } },
        { name: 'staging-eks', audit: { file: { path: '/tmp/b.log' } }, slack: { channel: '#staging', approvers: ['U0APPROVE1'] } },
      ],
    },
    ENV,
  );
}

const NET: unknown = { match: { namespaces: ['kube-system'], kinds: ['DaemonSet'] }, channel: '#net-alerts', owners: ['S0NETWORK1'] };
const PLATFORM: unknown = { match: { clusters: ['prod-*'], namespaces: ['flux-system'] }, channel: 'C0PLATFORM' };

function subject(over: Partial<RouteSubject> = {}): RouteSubject {
  return { cluster: 'prod-eks', namespace: 'kube-system', serviceAccount: 'multus', workloads: [{ kind: 'DaemonSet', name: 'kube-multus-ds' }], ...over };
}

describe('routing rules', () => {
  const rules = config([NET, PLATFORM]).slack!.routes!;

  it('parses with defaults: owners none, mentionFrom info', () => {
    expect(rules[1]).toEqual({ match: { clusters: ['prod-*'], namespaces: ['flux-system'] }, channel: 'C0PLATFORM', owners: [], mentionFrom: 'info' });
    expect(config([]).slack!.routes).toBeUndefined();
  });

  it('the effective config (config check) shows the rules and parses back to the same rules', () => {
    const form = toFileForm(config([NET, PLATFORM])) as { slack: { routes: unknown } };
    expect(form.slack.routes).toEqual(rules);
    expect(parseConfig(form, ENV).slack!.routes).toEqual(rules);
  });

  it('first matching rule wins; the cluster channel catches the rest', () => {
    expect(routeOf(rules, 'C0OPS00001', subject())).toEqual({ channel: '#net-alerts', owners: ['S0NETWORK1'], mentionFrom: 'info', rule: 0 });
    const both = [...rules, { match: { namespaces: ['kube-*'] }, channel: '#other', owners: [], mentionFrom: 'info' } as RouteRule];
    expect(routeOf(both, 'C0OPS00001', subject()).rule).toBe(0);
    expect(routeOf(rules, 'C0OPS00001', subject({ namespace: 'flux-system', serviceAccount: 'helm-controller', workloads: [{ kind: 'Deployment', name: 'helm-controller' }] })).channel).toBe('C0PLATFORM');
    // A Deployment in kube-system (coredns) is not a DaemonSet: the cluster's channel.
    expect(routeOf(rules, 'C0OPS00001', subject({ serviceAccount: 'coredns', workloads: [{ kind: 'Deployment', name: 'coredns' }] }))).toEqual({ channel: 'C0OPS00001', owners: [], mentionFrom: 'info' });
    // No workloads known (no cluster state): a kind condition does not hold.
    expect(routeOf(rules, 'C0OPS00001', subject({ workloads: [] })).channel).toBe('C0OPS00001');
    // The platform rule is limited to prod-* clusters.
    expect(routeOf(rules, '#staging', subject({ cluster: 'staging-eks', namespace: 'flux-system', workloads: [] })).channel).toBe('#staging');
  });

  it('a cluster-level alert (namespace *) always goes to the cluster channel', () => {
    const all: RouteRule[] = [{ match: {}, channel: '#everything', owners: ['U0OWNER001'], mentionFrom: 'info' }];
    expect(routeOf(all, 'C0OPS00001', subject({ namespace: '*', serviceAccount: '*', workloads: [] })).channel).toBe('C0OPS00001');
    expect(routeOf(all, 'C0OPS00001', subject()).channel).toBe('#everything');
  });

  it('matches labels and annotations of the workload or of its pods, value globs included', () => {
    const r: RouteRule[] = [
      { match: { labels: { team: 'network' } }, channel: '#net', owners: [], mentionFrom: 'info' },
      { match: { labels: { 'app.kubernetes.io/part-of': 'flu*' }, annotations: { owner: '*' } }, channel: '#platform', owners: [], mentionFrom: 'info' },
      { match: { serviceAccounts: ['fluent-*'], workloads: ['fluent-bit'] }, channel: '#observability', owners: [], mentionFrom: 'info' },
    ];
    expect(routeOf(r, 'C0', subject({ pods: [{ labels: { team: 'network' } }] })).channel).toBe('#net');
    expect(routeOf(r, 'C0', subject({ workloads: [{ kind: 'DaemonSet', name: 'x', labels: { team: 'network' } }] })).channel).toBe('#net');
    expect(routeOf(r, 'C0', subject({ pods: [{ labels: { team: 'storage' } }] })).channel).toBe('C0');
    // Both conditions must hold; they may hold on different objects.
    expect(routeOf(r, 'C0', subject({ workloads: [{ kind: 'Deployment', name: 'h', labels: { 'app.kubernetes.io/part-of': 'flux' } }] })).channel).toBe('C0');
    expect(routeOf(r, 'C0', subject({ workloads: [{ kind: 'Deployment', name: 'h', labels: { 'app.kubernetes.io/part-of': 'flux' } }], pods: [{ labels: {}, annotations: { owner: 'platform' } }] })).channel).toBe('#platform');
    expect(routeOf(r, 'C0', subject({ namespace: 'logging', serviceAccount: 'fluent-bit', workloads: [{ kind: 'DaemonSet', name: 'fluent-bit' }] })).channel).toBe('#observability');
    expect(rulesNeedState(r)).toBe(true);
    expect(rulesNeedState([{ match: { namespaces: ['a'] }, channel: '#a', owners: [], mentionFrom: 'info' }])).toBe(false);
    expect([...keysRulesName(r).labels].sort()).toEqual(['app.kubernetes.io/part-of', 'team']);
    expect([...keysRulesName(r).annotations]).toEqual(['owner']);
  });

  it('matches labels of the alert\'s namespace, value globs included; unknown namespace labels match no such rule', () => {
    const r: RouteRule[] = [
      { match: { namespaceLabels: { team: 'network' } }, channel: '#net', owners: [], mentionFrom: 'info' },
      { match: { namespaceLabels: { tier: 'plat*' }, labels: { app: 'flux' } }, channel: '#platform', owners: [], mentionFrom: 'info' },
    ];
    expect(routeOf(r, 'C0', subject({ namespaceLabels: { team: 'network' } })).channel).toBe('#net');
    expect(routeOf(r, 'C0', subject({ namespaceLabels: { team: 'storage' } })).channel).toBe('C0');
    // A pod or workload label of the same key is not a namespace label.
    expect(routeOf(r, 'C0', subject({ pods: [{ labels: { team: 'network' } }] })).channel).toBe('C0');
    // Namespace labels unknown (namespace not readable): the rule does not match.
    expect(routeOf(r, 'C0', subject()).channel).toBe('C0');
    expect(routeOf(r, 'C0', subject({ namespaceLabels: { tier: 'platform' }, pods: [{ labels: { app: 'flux' } }] })).channel).toBe('#platform');
    expect(routeOf(r, 'C0', subject({ namespaceLabels: { tier: 'platform' } })).channel).toBe('C0');
    expect(rulesNeedState(r.slice(0, 1))).toBe(true);
    expect(rulesNeedNamespaceLabels(r)).toBe(true);
    expect(rulesNeedNamespaceLabels([{ match: { labels: { team: 'x' } }, channel: '#a', owners: [], mentionFrom: 'info' }])).toBe(false);
    expect([...keysRulesName(r).namespaceLabels].sort()).toEqual(['team', 'tier']);
    expect([...keysRulesName(r).labels]).toEqual(['app']);
    expect(config([{ match: { namespaceLabels: { team: 'network' } }, channel: '#net' }]).slack!.routes![0]!.match).toEqual({ namespaceLabels: { team: 'network' } });
  });

  it('severity selects mentions, never channels', () => {
    const route = { owners: ['S0NETWORK1', 'U0OWNER001'], mentionFrom: 'warning' as const };
    expect(mentions(route, 'info')).toBe(false);
    expect(mentions(route, 'warning')).toBe(true);
    expect(mentions(route, 'critical')).toBe(true);
    expect(mentions({ owners: [], mentionFrom: 'info' }, 'critical')).toBe(false);
    expect(ownersMention(route.owners)).toBe('<!subteam^S0NETWORK1> <@U0OWNER001>');
  });

  it('a mention is built only from Slack ids: anything else is left out', () => {
    expect(ownersMention(['<!channel>', 'S123>', '@here', 'S0NET00001'])).toBe('<!subteam^S0NET00001>');
    const msg = withOwnersMention({ text: '<!channel>', blocks: [] }, { owners: ['<!here>'] });
    expect(msg.blocks).toEqual([]);
  });
});

describe('routing config errors', () => {
  it('names every wrong field of a rule', () => {
    let err: unknown;
    try {
      config([
        { match: { namespaces: [], kinds: ['daemonset'], labels: { 'bad key!': 'x' } }, channel: 'net-alerts', owners: ['<!subteam^S1>'], mentionFrom: 'loud', extra: 1 },
        { match: { clusters: ['dev-*'] }, channel: '#dev' },
        { match: { namespaceLabels: { 'bad key!': 'x', team: '' } }, channel: '#net' },
      ]);
    } catch (e) {
      err = e;
    }
    const text = String((err as Error).message);
    for (const path of ['slack.routes[0].match.namespaces', 'slack.routes[0].match.kinds[0]', 'slack.routes[0].match.labels', 'slack.routes[0].channel', 'slack.routes[0].owners[0]', 'slack.routes[0].mentionFrom', 'slack.routes[1].match.clusters', 'slack.routes[2].match.namespaceLabels', 'slack.routes[2].match.namespaceLabels.team']) {
      expect(text).toContain(path);
    }
    expect(text).toContain('matches no cluster with a slack section (prod-eks, staging-eks)');
  });
});

describe('channel scoping with routes', () => {
  const map = new ChannelMap(config([NET, PLATFORM]));

  it('a cluster works in its channel and every channel its rules route to, nowhere else', () => {
    expect(map.channelsOf('prod-eks')).toEqual(['C0OPS00001', '#net-alerts', 'C0PLATFORM']);
    expect(map.channelsOf('staging-eks')).toEqual(['#staging', '#net-alerts']);
    expect(map.allows('prod-eks', { id: 'C0PLATFORM' })).toBe(true);
    expect(map.allows('prod-eks', { id: 'C0NETALERT', name: 'net-alerts' })).toBe(true);
    expect(map.allows('staging-eks', { id: 'C0PLATFORM' })).toBe(false);
    expect(map.allows('prod-eks', { id: 'C0RANDOM01', name: 'random' })).toBe(false);
    expect(map.clustersIn({ id: 'C0PLATFORM' }).map((c) => c.name)).toEqual(['prod-eks']);
    expect(map.clustersIn({ id: 'C0NETALERT', name: 'net-alerts' }).map((c) => c.name)).toEqual(['prod-eks', 'staging-eks']);
    map.learn('#net-alerts', 'C0NETALERT');
    expect(map.clustersPostingTo('C0NETALERT')).toEqual(['prod-eks', 'staging-eks']);
  });

  it('routes a subject; undefined for a cluster without a channel', () => {
    expect(map.routeOf(subject())?.channel).toBe('#net-alerts');
    expect(map.routeOf(subject({ cluster: 'nope' }))).toBeUndefined();
  });
});
