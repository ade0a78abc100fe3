/**
 * Severity is said in words as well as in colour: where emoji do not render (a browser without an emoji font,
 * screen readers, plain-text notifications), 🔴/🟠/🔵 are identical boxes. Every message kind that shows a severity —
 * the alert, its escalation reply, Details, `/tokens status`, the Home tab, the digest and the per-finding card — is
 * rendered for each severity, its fallback `text` and its blocks stripped of every emoji, and must still name the
 * severity (critical / warning / info) beside the alert it belongs to. ✅/❌ states are said in words too.
 */
import { describe, expect, it } from 'vitest';
import type { Severity } from '../../../src/findings/types.js';
import {
  alertView,
  detailsMessage,
  digestMessage,
  escalationMessage,
  findingMessage,
  renderAlert,
  statusMessage,
  verificationMessage,
  type SlackMessage,
} from '../../../src/slack/blocks/index.js';
import { homeView } from '../../../src/slack/blocks/home.js';
import { multusFinding, NOW } from './fixtures.js';

const SEVERITIES: readonly Severity[] = ['critical', 'warning', 'info'];
const EMOJI = /\p{Extended_Pictographic}|\u{FE0F}|\u{200D}|\u{20E3}/gu;

/** A text with every emoji removed, as a reader without an emoji font gets it. */
const noEmoji = (s: string): string => s.replace(EMOJI, '');

/** Every text string of a Block Kit structure (header, section, fields, context, buttons…), emoji removed. */
function blockTexts(blocks: unknown): string[] {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (k === 'text' && typeof x === 'string') out.push(noEmoji(x));
        else walk(x);
      }
    }
  };
  walk(blocks);
  return out;
}

/** Whether `s` names severity `sev` as a word (any case). */
const names = (s: string, sev: Severity): boolean => new RegExp(`\\b${sev}\\b`, 'i').test(s);

/** The fallback text and the blocks of `m`, emoji removed, each name `sev`. */
function expectSaid(m: SlackMessage, sev: Severity): void {
  expect(noEmoji(m.text), m.text).toSatisfy((t: string) => names(t, sev));
  expect(blockTexts(m.blocks).join('\n')).toSatisfy((t: string) => names(t, sev));
}

/** The emoji-free lines (of blocks) that mention `subject` each name `sev`, and there is at least one. */
function expectLineSays(blocks: unknown, subject: string, sev: Severity): void {
  const lines = blockTexts(blocks).flatMap((t) => t.split('\n')).filter((l) => l.includes(subject));
  expect(lines.length, `no line mentions ${subject}`).toBeGreaterThan(0);
  for (const l of lines) expect(l).toSatisfy((t: string) => names(t, sev));
}

const finding = (severity: Severity, serviceAccount = 'multus') => multusFinding({ severity, serviceAccount, id: `f-${severity}-${serviceAccount}`.padEnd(12, 'x') });

describe('severity readable with emoji removed', () => {
  for (const sev of SEVERITIES) {
    it(`${sev}: the alert (header and fallback text), its escalation reply, Details and the per-finding card`, () => {
      const f = finding(sev);
      const alert = renderAlert(alertView([f], [f], { now: NOW, restarts: [], overflow: [] }));
      expectSaid(alert, sev);
      // The header itself, not only some other block, says it.
      expect(noEmoji((alert.blocks[0] as { text: { text: string } }).text.text)).toSatisfy((t: string) => names(t, sev));
      // Escalations only go up: to warning or critical.
      if (sev !== 'info') expectSaid(escalationMessage(f, { type: 'severity', from: 'info', to: sev }, { now: NOW }), sev);
      expectSaid(detailsMessage(f, f.tokens, { now: NOW, alertSeverity: sev }), sev);
      expectSaid(findingMessage(f, { now: NOW, buttonsFor: () => undefined }), sev);
    });
  }

  it('/tokens status, the Home tab and the digest: each alert line names its own severity', () => {
    const subjects = SEVERITIES.map((sev) => ({ sev, f: finding(sev, `sa-${sev}`) }));
    const status = statusMessage(
      [{ name: 'prod-eks', lastPoll: NOW, health: [], alertsBySeverity: { critical: 1, warning: 1, info: 1 }, alerts: subjects.map(({ sev, f }) => ({ live: [f], severity: sev })) }],
      { now: NOW },
    );
    for (const sev of SEVERITIES) expect(noEmoji(status.text)).toSatisfy((t: string) => names(t, sev));
    for (const { sev } of subjects) expectLineSays(status.blocks, `kube-system/sa-${sev}`, sev);

    const home = homeView({ now: NOW, alerts: subjects.map(({ sev, f }) => ({ cluster: 'prod-eks', live: [f], severity: sev })), clusters: [{ name: 'prod-eks', sources: [] }], approvals: [] });
    for (const { sev } of subjects) expectLineSays(home.blocks, `kube-system/sa-${sev}`, sev);

    const digest = digestMessage(
      subjects.map(({ sev }) => ({ groupId: `g-${sev}`, cluster: 'prod-eks', subject: `kube-system/sa-${sev}`, severity: sev, fact: 'rejected in 5 days' })),
      NOW,
    );
    for (const { sev } of subjects) {
      expectLineSays(digest.blocks, `kube-system/sa-${sev}`, sev);
      expect(noEmoji(digest.text)).toContain(`${sev}: kube-system/sa-${sev}`);
    }
  });

  it('✅ states are said in words too: a resolved alert and a verified fix', () => {
    const f = finding('critical');
    const resolved = renderAlert(alertView([f], [], { now: NOW, restarts: [], overflow: [], resolved: { at: NOW, note: 'quiet' } }));
    expect(noEmoji(resolved.text)).toMatch(/resolved/i);
    expect(noEmoji((resolved.blocks[0] as { text: { text: string } }).text.text)).toMatch(/^ ?Resolved · /);
    const verified = verificationMessage({ outcome: 'resolved', finding: f, action: 'restart', actionAt: NOW - 3 * 3_600_000, now: NOW });
    expect(noEmoji(verified.text)).toMatch(/verified/i);
    expect(blockTexts(verified.blocks).join('\n')).toMatch(/Verified/);
  });
});
