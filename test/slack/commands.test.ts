/**
 * `/tokens` end to end (signed slash commands to the real Bolt HTTP receiver; answers through the fake response_url),
 * and request signature checks.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { sendSlashCommand } from '../../src/sandbox/fakes/slack.js';
import { parseTokensCommand } from '../../src/slack/commands.js';
import {
  APPROVER,
  blockText,
  buttonIds,
  CLUSTER,
  ELSEWHERE,
  OPS,
  REQUESTER,
  SECRET,
  STAGING,
  startHarness,
  type Harness,
} from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const lastEphemeral = (x: Harness, user: string) => x.slack.ephemerals({ user }).at(-1)!;

describe('parseTokensCommand', () => {
  it.each([
    ['', { sub: 'help' }],
    ['  help ', { sub: 'help' }],
    ['STATUS', { sub: 'status' }],
    ['status prod-eks', { sub: 'status', cluster: 'prod-eks' }],
    ['scan  prod-eks extra', { sub: 'scan', cluster: 'prod-eks' }],
    ['history', { sub: 'history' }],
    ['restart kube-multus-ds', { sub: 'unknown', word: 'restart' }],
  ])('%j → %j', (text, parsed) => {
    expect(parseTokensCommand(text)).toEqual(parsed);
  });
});

describe('/tokens', () => {
  it('status <cluster>: ephemeral with last poll, health per source, alerts by severity, one linked line per alert, no buttons', async () => {
    h = await startHarness();
    const res = await h.command('status prod-eks', REQUESTER);
    expect(res.status).toBe(200);
    expect(res.body).toBe('');
    const e = lastEphemeral(h, REQUESTER);
    expect(e.via).toBe('response_url');
    expect(e.channel).toBe(OPS);
    // One alert per root cause: Multus's stale tokens and 401s count once.
    expect(e.text).toBe('Tokenwatch status — prod-eks: 1 critical, 0 warning, 3 info');
    const blocks = blockText(e);
    expect(blocks).toContain('Tokenwatch status · prod-eks');
    expect(blocks).toContain(`✅ audit source file:${h.auditPath}`);
    expect(blocks).toContain('✅ Kubernetes API');
    expect(blocks).toContain('🔴 1 critical · 🟠 0 warning · 🔵 3 info');
    // Actions happen on the alert: no buttons here, a link to every alert (chat.getPermalink of its message).
    expect(buttonIds(e)).toEqual([]);
    const links = h.slack.callsTo('chat.getPermalink').filter((c) => c.response.ok === true).map((c) => [c.args.message_ts, c.response['permalink'] as string]);
    expect(links.map(([ts]) => ts)).toEqual(h.slack.messages(OPS).map((m) => m.ts));
    const lines = (e.blocks as Array<{ type: string; text?: { text: string } }>).slice(2).map((b) => b.text!.text);
    expect(lines).toEqual([
      `🔴 critical · <${links[0]![1]}|kube-system/multus> — requests now fail with 401 · requests rejected with 401 · stale tokens`,
      `🔵 info · <${links[1]![1]}|flux-system/helm-controller> — rejected in 44 days · stale tokens`,
      `🔵 info · <${links[2]![1]}|logging/fluent-bit> — rejected in 70 days · stale tokens`,
      `🔵 info · <${links[3]![1]}|ci/deployer> — legacy Secret token in use · legacy Secret token`,
    ]);
    // Nobody else sees it, nothing is posted in the channel.
    expect(h.slack.ephemerals().filter((x) => x.user !== REQUESTER)).toEqual([]);
    expect(h.slack.messages(OPS)).toHaveLength(4);
  });

  it('status shows Kubernetes access problems and a degraded audit source with the reason', async () => {
    // Direct reads (kubernetes.watch: false): a fresh watch cache would answer without the forbidden pod list.
    h = await startHarness({ tweak: (c) => Object.assign(c.clusters[0]!.kubernetes, { watch: false }) });
    h.kube.forbid({ verb: 'list', resource: 'pods' });
    await h.poll();
    rmSync(h.auditPath);
    mkdirSync(h.auditPath);
    await h.poll();
    await h.command('status prod-eks', REQUESTER);
    const blocks = blockText(lastEphemeral(h, REQUESTER));
    expect(blocks).toMatch(/❌ audit source file:[^:]+: degraded: [^"]*EISDIR/);
    expect(blocks).toMatch(/❌ Kubernetes API failed a read: cluster state unavailable: forbidden: no permission to list pods .*?, since 12:00 UTC/);
  });

  it('status says when cluster state bypasses the watch cache, and that it is ok while the cache serves', async () => {
    h = await startHarness();
    const cache = h.serve.context.clusters.get(CLUSTER)!.watchCache!;
    await cache.synced();
    await h.command('status prod-eks', REQUESTER);
    expect(blockText(lastEphemeral(h, REQUESTER))).toContain('✅ watch cache: ok');
    cache.stop();
    await h.command('status prod-eks', REQUESTER);
    expect(blockText(lastEphemeral(h, REQUESTER))).toContain('❌ watch cache stopped, since 12:00 UTC');
  });

  it('status without a cluster shows the clusters of this channel; elsewhere it says where clusters report', async () => {
    h = await startHarness();
    await h.command('status', REQUESTER, OPS);
    expect(lastEphemeral(h, REQUESTER).text).toBe('Tokenwatch status — prod-eks: 1 critical, 0 warning, 3 info');
    await h.command('status', REQUESTER, ELSEWHERE);
    expect(lastEphemeral(h, REQUESTER).text).toBe(
      '⛔ This channel is not the alert channel of any cluster. Clusters report to: `prod-eks` in <#C0OPS00001>, `staging-eks` in <#C0STAGE001>.',
    );
  });

  it('a cluster asked about from another cluster’s channel is refused politely', async () => {
    h = await startHarness();
    await h.command('status staging-eks', REQUESTER, OPS);
    expect(lastEphemeral(h, REQUESTER).text).toBe('⛔ Cluster *staging-eks* reports to <#C0STAGE001>; ask there. Each channel only reaches its own clusters.');
    await h.command('scan prod-eks', REQUESTER, STAGING);
    expect(lastEphemeral(h, REQUESTER).text).toBe('⛔ Cluster *prod-eks* reports to <#C0OPS00001>; ask there. Each channel only reaches its own clusters.');
  });

  it('unknown cluster and unknown subcommand say what exists; help lists the subcommands', async () => {
    h = await startHarness();
    await h.command('status prod', REQUESTER);
    expect(lastEphemeral(h, REQUESTER).text).toBe('Unknown cluster "prod". Known clusters: prod-eks, staging-eks.');
    await h.command('restart kube-multus-ds', REQUESTER);
    // As sent: the fallback text is escaped (Slack shows `<cluster>`; raw, `<cluster>` would be parsed as a link).
    expect(lastEphemeral(h, REQUESTER).text).toBe('Unknown subcommand "restart". Subcommands: status [cluster], scan &lt;cluster&gt;, history &lt;cluster&gt;, help.');
    await h.command('', REQUESTER);
    expect(lastEphemeral(h, REQUESTER).text).toBe('tokenwatch help: /tokens status [cluster], /tokens scan &lt;cluster&gt;, /tokens history &lt;cluster&gt;, /tokens help');
  });

  it('scan <cluster> starts a poll now, or says one is running', async () => {
    h = await startHarness();
    h.kube.delay(300, { verb: 'list' });
    await Promise.all([h.command('scan prod-eks', REQUESTER), h.command('scan', APPROVER)]);
    const answers = [lastEphemeral(h, REQUESTER).text, lastEphemeral(h, APPROVER).text].sort();
    expect(answers).toEqual(['A poll of prod-eks is already running', 'Polling prod-eks now']);
    await h.serve.context.scheduler.current(CLUSTER);
    expect(await h.metrics.text()).toContain('tokenwatch_polls_total{cluster="prod-eks",outcome="ok"} 2');
  });

  it('history <cluster> lists actions with requester, approvers and outcome', async () => {
    h = await startHarness();
    await h.command('history prod-eks', REQUESTER);
    expect(lastEphemeral(h, REQUESTER).text).toBe('tokenwatch history for prod-eks: no actions yet');
    const alert = await h.alert('kube-system', 'multus');
    await h.click(REQUESTER, alert, 'tw_restart');
    const approval = h.slack.thread(OPS, alert.ts)[0]!;
    await h.click(APPROVER, approval, 'tw_approve');
    await h.click(REQUESTER, await h.alert('logging', 'fluent-bit'), 'tw_snooze_7d');
    await h.command('history prod-eks', REQUESTER);
    const e = lastEphemeral(h, REQUESTER);
    expect(e.text).toBe('tokenwatch history for prod-eks: 2 actions');
    const text = blockText(e);
    expect(text).toContain('*restart* DaemonSet `kube-system/kube-multus-ds` by <@U0REQUEST1>, approved by <@U0APPROVE1> · *succeeded*');
    expect(text).toContain('*snooze* ServiceAccount `logging/fluent-bit` by <@U0REQUEST1> · *succeeded*');
  });
});

describe('request signatures (HTTP mode)', () => {
  it('a bad signature or a stale timestamp gets 401 and reaches no handler', async () => {
    h = await startHarness();
    const url = h.bot.eventsUrl!;
    const fields = { text: 'status prod-eks', user_id: REQUESTER, channel_id: OPS, response_url: h.slack.responseUrl({ channel: OPS, user: REQUESTER }) };
    expect((await sendSlashCommand(url, 'not-the-secret-0000000000000000', fields)).status).toBe(401);
    expect((await sendSlashCommand(url, SECRET, fields, { timestampSec: Math.floor(Date.now() / 1000) - 6 * 60 })).status).toBe(401);
    expect((await sendSlashCommand(url, SECRET, fields, { signature: 'v0=' + '0'.repeat(64) })).status).toBe(401);
    await h.bot.idle();
    expect(h.slack.ephemerals()).toEqual([]);
    expect((await sendSlashCommand(url, SECRET, fields)).status).toBe(200);
  });
});
