/**
 * The sandbox page's Block Kit renderer against the bot's own builders: every builder's output renders with no
 * unknown-element fallback, every button and header survives, and one finding message is pinned as an HTML snapshot,
 * so the page cannot drift from what Slack shows.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Approval } from '../../src/approvals/index.js';
import type { Finding } from '../../src/findings/types.js';
import { runScan } from '../../src/scan/run.js';
import { approvalDecidedMessage, approvalRequestMessage, detailsMessage, escalationMessage, findingButtons, findingMessage, helpMessage, historyMessage, progressMessage, refusalMessage, statusMessage, supersededMessage, unknownCommandMessage, verificationMessage, type FindingAction, type SlackMessage } from '../../src/slack/blocks/index.js';
import { validateMessage } from '../slack/blocks/validate.js';
import { clusterEventMessage, noteMessage, persistingMessage, recreatedMessage, reopenedMessage, requestedMessage, scanMessage, snoozedMessage } from '../../src/slack/messages.js';
import {
  escapeHtml,
  formatSlackDate,
  mrkdwnToHtml,
  renderBlocks,
  renderMessageBody,
  UNKNOWN_CLASS,
} from '../../src/sandbox/page/blockkit.js';

const EXAMPLES = new URL('../../examples/', import.meta.url).pathname;
const NOW = Date.parse('2026-11-20T12:00:00Z');
const CTX = { users: { U0REQUEST: 'Riya', U0APPROVE: 'Ahmed' }, channels: { C0OPSPROD1: 'ops-prod-eks' }, now: NOW };

let findings: Finding[];
beforeAll(async () => {
  const r = await runScan({
    files: [`${EXAMPLES}audit/kube-apiserver-audit-2026-11-19T06-00-00.000.log.gz`, `${EXAMPLES}audit/kube-apiserver-audit.log`],
    cluster: 'prod-eks',
    snapshot: `${EXAMPLES}cluster-snapshot.json`,
    maxTokenAge: { mode: 'eks' },
    now: NOW,
  });
  findings = r.report.findings;
});

/** Deterministic opaque ids: one per action kind. */
const buttonsFor = (a: FindingAction): string =>
  a.action === 'restart' ? `restart-${a.workload.name}` : a.action === 'snooze' ? `snooze-${a.days}d-000` : `${a.action}-0000`;

function approval(over: Partial<Approval> = {}): Approval {
  return {
    id: 'apr_0123456789abcdef',
    action: 'restart',
    target: { cluster: 'prod-eks', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f-1' },
    requester: 'U0REQUEST',
    createdAt: NOW - 60_000,
    expiresAt: NOW + 29 * 60_000,
    requiredApprovals: 1,
    votes: [],
    state: 'requested',
    dryRun: { ok: true, message: 'dry run of the rollout restart of DaemonSet kube-system/kube-multus-ds passed', at: NOW - 59_000 },
    updatedAt: NOW - 60_000,
    ...over,
  };
}

/** Every message the bot builds, by name (built lazily: findings come from the scan in beforeAll). */
function allMessages(): Array<[string, SlackMessage]> {
  const multus = findings.find((f) => f.serviceAccount === 'multus' && f.kind === 'stale-token')!;
  const legacy = findings.find((f) => f.kind === 'legacy-token')!;
  const out: Array<[string, SlackMessage]> = [];
  for (const f of findings) {
    out.push([`finding ${f.kind} ${f.namespace}/${f.serviceAccount}`, findingMessage(f, { now: NOW, buttonsFor, podsTotal: 6, hourly: { [String(NOW - 3_600_000)]: 3, [String(NOW)]: 1 }, snoozedUntil: NOW + 86_400_000 })]);
    out.push([`resolved ${f.kind} ${f.namespace}/${f.serviceAccount}`, findingMessage(f, { now: NOW, buttonsFor, resolved: { at: NOW, note: 'no stale use for 2 h' } })]);
    out.push([`details ${f.kind} ${f.namespace}/${f.serviceAccount}`, detailsMessage(f, f.tokens, { now: NOW })]);
  }
  out.push(['escalation severity', escalationMessage(multus, { type: 'severity', from: 'warning', to: 'critical' }, { now: NOW })]);
  out.push(['escalation 401', escalationMessage(multus, { type: 'first-401', requests: 15 }, { now: NOW })]);
  const approvers = ['U0APPROVE', 'S0PLATFORM'];
  out.push(['approval request', approvalRequestMessage(approval(), { desired: 6, updateStrategy: 'RollingUpdate', note: 'maxUnavailable 1' }, approvers, { now: NOW, approveId: 'approve-0000', rejectId: 'reject-00000' })]);
  out.push(['approval request, dry run failed', approvalRequestMessage(approval({ dryRun: { ok: false, message: 'daemonsets.apps "kube-multus-ds" is forbidden', at: NOW } }), undefined, approvers, { now: NOW })]);
  out.push(['approval request, expired', approvalRequestMessage(approval(), undefined, approvers, { now: NOW + 3_600_000, approveId: 'approve-0000', rejectId: 'reject-00000' })]);
  const vote = { user: 'U0APPROVE', vote: 'approve' as const, at: NOW };
  for (const state of ['approved', 'running', 'succeeded', 'failed', 'rejected', 'expired'] as const) {
    const votes = state === 'rejected' ? [{ user: 'U0APPROVE', vote: 'reject' as const, at: NOW, reason: 'not now' }] : state === 'expired' ? [] : [vote];
    out.push([`approval ${state}`, approvalDecidedMessage(approval({ state, votes, ...(state === 'failed' ? { error: 'rollout timed out' } : {}) }), approvers, { now: NOW })]);
  }
  const target = approval().target;
  out.push(['progress rolling', progressMessage({ desired: 6, updated: 2, ready: 5, available: 5, done: false, timedOut: false }, { target, now: NOW, startedAt: NOW - 30_000 })]);
  out.push(['progress done', progressMessage({ desired: 6, updated: 6, ready: 6, available: 6, done: true, timedOut: false }, { target, now: NOW, startedAt: NOW - 60_000 })]);
  out.push(['progress timed out', progressMessage({ desired: 6, updated: 4, ready: 5, available: 5, done: false, timedOut: true }, { target, now: NOW, startedAt: NOW - 600_000, timeoutMs: 600_000 })]);
  out.push(['verification resolved', verificationMessage({ outcome: 'resolved', finding: multus, action: 'restart', actionAt: NOW - 7_200_000, now: NOW, settleMs: 7_200_000 })]);
  out.push(['verification superseded', supersededMessage(multus, 'restart', NOW - 7_200_000, 'restart', NOW - 600_000)]);
  out.push(['verification recurrence', verificationMessage({ outcome: 'recurrence', finding: multus, action: 'restart', actionAt: NOW - 7_200_000, now: NOW, staleRequests: 3, lastSeen: NOW - 60_000 })]);
  const counts = { critical: 2, warning: 0, info: 3 };
  out.push([
    'status one cluster',
    statusMessage(
      [{ name: 'prod-eks', lastPoll: NOW - 10_000, health: [{ name: 'audit: file', ok: true, lastSuccess: NOW - 10_000 }, { name: 'kubernetes API', ok: false, detail: 'forbidden' }], alertsBySeverity: counts, channel: { id: 'C0OPSPROD1', error: 'not_in_channel' }, alerts: findings.map((f) => ({ live: [f], severity: f.severity, permalink: `https://tokenwatch-test.slack.com/archives/C0OPSPROD1/p${f.id}` })) }],
      { now: NOW },
    ),
  ]);
  out.push(['status two clusters', statusMessage([{ name: 'prod-eks', lastPoll: null, health: [], alertsBySeverity: counts, alerts: findings.map((f) => ({ live: [f], severity: f.severity })) }, { name: 'staging', lastPoll: NOW, health: [], alertsBySeverity: { critical: 0, warning: 0, info: 0 } }], { now: NOW })]);
  out.push(['status no clusters', statusMessage([], { now: NOW })]);
  out.push(['help', helpMessage(['prod-eks', 'staging'])]);
  out.push(['unknown cluster', unknownCommandMessage({ kind: 'cluster', value: 'prdo' }, ['prod-eks'])]);
  out.push(['unknown subcommand', unknownCommandMessage({ kind: 'subcommand', value: 'restart' }, ['prod-eks'])]);
  out.push(['refusal', refusalMessage('You requested this restart, so someone else must approve it (no self-approval).')]);
  out.push(['history empty', historyMessage('prod-eks', [], { now: NOW })]);
  out.push(['history', historyMessage('prod-eks', [{ at: NOW, action: 'restart', target, requester: 'U0REQUEST', approvers: ['U0APPROVE'], state: 'succeeded' }, { at: NOW - 1000, action: 'snooze', target, requester: 'U0REQUEST', approvers: [], state: 'rejected', detail: 'not now' }], { now: NOW })]);
  out.push(['requested', requestedMessage(approval(), approvers)]);
  out.push(['snoozed', snoozedMessage(multus, 'U0REQUEST', NOW + 86_400_000)]);
  out.push(['reopened', reopenedMessage(multus, NOW - 3_600_000)]);
  out.push(['reopened late', reopenedMessage(multus, NOW - 3_600_000, true)]);
  out.push([
    'cluster event',
    clusterEventMessage({ kind: 'credential-change', cluster: 'prod-eks', at: new Date(NOW - 3_600_000).toISOString(), summary: 'x', serviceAccounts: 14, recovered: Array.from({ length: 13 }, (_, i) => `ns${i}/client-${i}`), stillFailing: ['apps/reporter'] }),
  ]);
  out.push(['persisting', persistingMessage(legacy, 'recreate-serviceaccount', { outcome: 'persisting', tokens: 1, lastSeen: NOW, signals: ['legacy-token'] }, NOW - 600_000)]);
  out.push(['recreated', recreatedMessage(multus, { oldUid: 'old-uid', newUid: 'new-uid', preserved: { labels: 2, annotations: ['eks.amazonaws.com/role-arn'], imagePullSecrets: 1, automountServiceAccountToken: true } }, findingButtons(multus, buttonsFor).slice(0, 1))]);
  for (const r of ['started', 'busy', 'unknown-job', 'stopped'] as const) out.push([`scan ${r}`, scanMessage('prod-eks', r, '<#C0OPSPROD1>')]);
  out.push(['note', noteMessage('Approved (1 of 2). One more approval is needed.')]);
  return out;
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Every object of a JSON tree with `type === t`. */
function collect(v: unknown, t: string, out: Json[] = []): Json[] {
  if (Array.isArray(v)) for (const x of v) collect(x, t, out);
  else if (isObj(v)) {
    if (v.type === t) out.push(v);
    for (const x of Object.values(v)) collect(x, t, out);
  }
  return out;
}

describe('mrkdwn', () => {
  it('renders the basics: bold, italic, strike, code, links, mentions, channels, escapes, emoji, quotes, code blocks', () => {
    expect(mrkdwnToHtml('*Cause* (`multus-thin`): _maybe_ ~gone~', CTX)).toBe('<strong>Cause</strong> (<code class="bk-code">multus-thin</code>): <em>maybe</em> <del>gone</del>');
    expect(mrkdwnToHtml('<https://github.com/aws/amazon-vpc-cni-k8s/issues/1868|aws/amazon-vpc-cni-k8s#1868> and <https://example.com>')).toBe(
      '<a class="bk-link" href="https://github.com/aws/amazon-vpc-cni-k8s/issues/1868" target="_blank" rel="noopener noreferrer">aws/amazon-vpc-cni-k8s#1868</a> and <a class="bk-link" href="https://example.com" target="_blank" rel="noopener noreferrer">https://example.com</a>',
    );
    expect(mrkdwnToHtml('<@U0REQUEST> asks <@U9UNKNOWN> in <#C0OPSPROD1> and <#C0OTHER|other>, <!here>, <!subteam^S0PLAT|@platform>', CTX)).toBe(
      '<span class="bk-mention" data-user="U0REQUEST">@Riya</span> asks <span class="bk-mention" data-user="U9UNKNOWN">@U9UNKNOWN</span> in <span class="bk-channel">#ops-prod-eks</span> and <span class="bk-channel">#other</span>, <span class="bk-mention">@here</span>, <span class="bk-mention">@platform</span>',
    );
    expect(mrkdwnToHtml('a &lt;b&gt; &amp; "c" <script>')).toBe('a &lt;b&gt; &amp; &quot;c&quot; &lt;script&gt;');
    expect(mrkdwnToHtml(':white_check_mark: done :not_an_emoji: 12:30:45')).toBe('✅ done :not_an_emoji: 12:30:45');
    expect(mrkdwnToHtml('line 1\n> quoted\n> more\nline 2')).toBe('line 1<blockquote class="bk-quote">quoted<br>more</blockquote>line 2');
    expect(mrkdwnToHtml('```\nkubectl -n *a* get <pods>\n```')).toBe('<pre class="bk-pre">kubectl -n *a* get &lt;pods&gt;\n</pre>');
    // Delimiters only at word boundaries; never inside code.
    expect(mrkdwnToHtml('2*3*4 snake_case_name `*x*` *<@U0APPROVE>*', CTX)).toBe(
      '2*3*4 snake_case_name <code class="bk-code">*x*</code> <strong><span class="bk-mention" data-user="U0APPROVE">@Ahmed</span></strong>',
    );
    expect(mrkdwnToHtml('<javascript:alert(1)|click>')).toBe('&lt;javascript:alert(1)|click&gt;');
  });

  it('formats Slack date tokens in UTC, relative to now when given', () => {
    const t = Date.parse('2026-11-20T09:05:07Z') / 1000;
    expect(formatSlackDate(t, '{date_num} {time} {time_secs}')).toBe('2026-11-20 09:05 09:05:07');
    expect(formatSlackDate(t, '{date} / {date_short} / {date_long}')).toBe('November 20th, 2026 / Nov 20, 2026 / Friday, November 20th, 2026');
    expect(formatSlackDate(t, '{date_short_pretty} {time}', NOW)).toBe('Today 09:05');
    expect(formatSlackDate(t - 86_400, '{date_short_pretty}', NOW)).toBe('Yesterday');
    expect(formatSlackDate(t, '{ago}', NOW)).toBe('2 hours ago');
    expect(formatSlackDate(t, '{date_short_pretty} {ago}')).toBe('Nov 20, 2026 Nov 20, 2026 09:05');
    expect(mrkdwnToHtml(`last <!date^${t}^{date_short_pretty} {time}|2026-11-20 09:05 UTC>`, CTX)).toBe(
      'last <time class="bk-date" datetime="2026-11-20T09:05:07.000Z" title="2026-11-20 09:05 UTC">Today 09:05</time>',
    );
  });
});

describe('blocks', () => {
  it('renders header, section with fields and accessory, context with image, actions with styled and confirm buttons, divider, image; unknown types visibly', () => {
    const html = renderBlocks(
      [
        { type: 'header', text: { type: 'plain_text', text: 'Hi :wave: <b>', emoji: true } },
        { type: 'section', block_id: 's1', text: { type: 'mrkdwn', text: '*x*' }, fields: [{ type: 'mrkdwn', text: '_a_' }, { type: 'plain_text', text: 'b' }], accessory: { type: 'image', image_url: 'https://example.com/i.png', alt_text: 'pic' } },
        { type: 'context', elements: [{ type: 'image', image_url: 'https://example.com/c.png', alt_text: 'c' }, { type: 'mrkdwn', text: 'ctx' }] },
        {
          type: 'actions',
          block_id: 'acts',
          elements: [
            { type: 'button', action_id: 'go', text: { type: 'plain_text', text: 'Go' }, value: 'v1', style: 'danger', confirm: { title: { type: 'plain_text', text: 'Sure?' }, text: { type: 'mrkdwn', text: '*Really*' }, confirm: { type: 'plain_text', text: 'Yes' }, deny: { type: 'plain_text', text: 'No' }, style: 'danger' } },
            { type: 'button', text: { type: 'plain_text', text: 'Docs' }, url: 'https://example.com/docs' },
          ],
        },
        { type: 'divider' },
        { type: 'image', image_url: 'https://example.com/big.png', alt_text: 'big', title: { type: 'plain_text', text: 'Big' } },
        { type: 'rich_text', elements: [] },
      ],
      CTX,
    );
    expect(html).toBe(
      [
        '<div class="bk-block bk-header" data-block-id="bk-0">Hi 👋 &lt;b&gt;</div>',
        '<div class="bk-block bk-section" data-block-id="s1"><div class="bk-section-main"><div class="bk-section-text"><strong>x</strong></div><div class="bk-fields"><div class="bk-field"><em>a</em></div><div class="bk-field">b</div></div></div><div class="bk-accessory"><img class="bk-accessory-image" src="https://example.com/i.png" alt="pic"></div></div>',
        '<div class="bk-block bk-context" data-block-id="bk-2"><img class="bk-context-image" src="https://example.com/c.png" alt="c"><span class="bk-context-text">ctx</span></div>',
        '<div class="bk-block bk-actions" data-block-id="acts"><button type="button" class="bk-button bk-danger" data-action-id="go" data-block-id="acts" data-value="v1" data-text="Go" data-confirm="{&quot;title&quot;:&quot;Sure?&quot;,&quot;textHtml&quot;:&quot;&lt;strong&gt;Really&lt;/strong&gt;&quot;,&quot;confirm&quot;:&quot;Yes&quot;,&quot;deny&quot;:&quot;No&quot;,&quot;style&quot;:&quot;danger&quot;}">Go</button><a class="bk-button" href="https://example.com/docs" target="_blank" rel="noopener noreferrer">Docs</a></div>',
        '<div class="bk-block bk-divider" data-block-id="bk-4"><hr></div>',
        '<div class="bk-block bk-image" data-block-id="bk-5"><figure><figcaption>Big</figcaption><img class="bk-image-img" src="https://example.com/big.png" alt="big"></figure></div>',
        `<div class="${UNKNOWN_CLASS}" data-type="rich_text">Unsupported block: rich_text</div>`,
      ].join(''),
    );
  });

  it('a message without blocks shows its text as mrkdwn', () => {
    expect(renderMessageBody({ text: 'hello *world*' })).toBe('<div class="bk-blocks"><div class="bk-block bk-text">hello <strong>world</strong></div></div>');
  });
});

describe("the bot's builders on the page", () => {
  it('every builder output is valid Block Kit and renders with no unknown-element fallback; every header and button survives', () => {
    const messages = allMessages();
    expect(messages.length).toBeGreaterThan(40);
    const typesSeen = new Set<string>();
    for (const [name, msg] of messages) {
      expect(validateMessage(msg), name).toEqual([]);
      const html = renderMessageBody(msg, CTX);
      expect(html, name).not.toContain(UNKNOWN_CLASS);
      for (const b of msg.blocks) typesSeen.add(b.type);
      for (const h of msg.blocks.filter((b) => b.type === 'header')) {
        expect(html, name).toContain(escapeHtml((h as { text: { text: string } }).text.text));
      }
      const buttons = collect(msg.blocks, 'button');
      expect((html.match(/<button /g) ?? []).length, name).toBe(buttons.length);
      for (const b of buttons) {
        expect(html, name).toContain(`data-action-id="${escapeHtml(String(b.action_id))}"`);
        expect(html, name).toContain(`data-value="${escapeHtml(String(b.value))}"`);
        if (b.style === 'danger') expect(html, name).toMatch(new RegExp(`class="bk-button bk-danger" data-action-id="${String(b.action_id)}"`));
        if (b.confirm) {
          const title = (b.confirm as { title: { text: string } }).title.text;
          expect(html, name).toContain(escapeHtml(JSON.stringify(title).slice(1, -1)));
        }
      }
      // No raw mrkdwn left behind: every Slack <…> token became HTML.
      expect(html, name).not.toMatch(/<(@|#|!date|https?:)/);
    }
    expect([...typesSeen].sort()).toEqual(['actions', 'context', 'divider', 'header', 'section']);
  });

  it('the Multus finding message renders as in the snapshot', async () => {
    const multus = findings.find((f) => f.serviceAccount === 'multus' && f.kind === 'stale-token')!;
    const msg = findingMessage(multus, { now: NOW, buttonsFor, podsTotal: 6, hourly: { [String(NOW - 7_200_000)]: 2, [String(NOW - 3_600_000)]: 5, [String(NOW)]: 1 } });
    const html = renderMessageBody(msg, CTX).replace(/<div class="bk-block /g, '\n<div class="bk-block ');
    await expect(`${html}\n`).toMatchFileSnapshot('./__snapshots__/multus-finding.html');
  });
});
