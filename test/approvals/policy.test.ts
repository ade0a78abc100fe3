import { describe, expect, it } from 'vitest';
import { approvalPolicyFor } from '../../src/approvals/from-config.js';
import { parseConfig } from '../../src/config/index.js';
import { isListed, matchesNamespace, namespaceAllowed, requiredApprovalsFor, resolveMembers } from '../../src/approvals/policy.js';
import { definePolicy } from './helpers.js';

describe('resolveMembers', () => {
  const groups: Record<string, string[]> = { S0OPS00001: ['U0AAAAAAA1', 'U0BBBBBBB2'], S0SRE00001: ['U0BBBBBBB2', 'W0CCCCCCC3'] };
  const lookup = (g: string): string[] => groups[g] ?? [];

  it('expands groups into distinct user ids in first-seen order', () => {
    expect(resolveMembers(['U0ZZZZZZZ9', 'S0OPS00001', 'S0SRE00001', 'U0AAAAAAA1'], lookup)).toEqual([
      'U0ZZZZZZZ9',
      'U0AAAAAAA1',
      'U0BBBBBBB2',
      'W0CCCCCCC3',
    ]);
  });

  it('drops wildcards, unknown groups and ids that are not Slack user ids', () => {
    expect(resolveMembers(['*', 'S0UNKNOWN1', 'alice', 'C0CHANNEL1', 'U0AAAAAAA1'], lookup)).toEqual(['U0AAAAAAA1']);
  });
});

describe('policy helpers', () => {
  it('isListed matches users directly or through groups; the wildcard only when asked', () => {
    expect(isListed('U0AAAAAAA1', [], ['U0AAAAAAA1'])).toBe(true);
    expect(isListed('U0AAAAAAA1', ['S0OPS00001'], ['S0OPS00001'])).toBe(true);
    expect(isListed('U0AAAAAAA1', ['S0OTHER001'], ['S0OPS00001'])).toBe(false);
    expect(isListed('U0AAAAAAA1', [], ['*'])).toBe(false);
    expect(isListed('U0AAAAAAA1', [], ['*'], true)).toBe(true);
  });

  it('matches namespace patterns exactly or by prefix', () => {
    expect(matchesNamespace('kube-system', 'kube-system')).toBe(true);
    expect(matchesNamespace('kube-system', 'kube-*')).toBe(true);
    expect(matchesNamespace('kube-system', 'kube')).toBe(false);
    expect(matchesNamespace('anything', '*')).toBe(true);
  });

  it('allows namespaces by allow/deny with deny winning', () => {
    const p = definePolicy({ namespaces: { allow: ['kube-*', 'monitoring'], deny: ['kube-public'] } });
    expect(['kube-system', 'kube-public', 'monitoring', 'default'].map((n) => namespaceAllowed(n, p))).toEqual([true, false, true, false]);
    expect(namespaceAllowed('default', definePolicy())).toBe(true);
  });

  it('requires protectedApprovals in protected namespaces, else 1', () => {
    const p = definePolicy({ protectedNamespaces: ['kube-system'], protectedApprovals: 3 });
    expect(requiredApprovalsFor('kube-system', p)).toBe(3);
    expect(requiredApprovalsFor('default', p)).toBe(1);
  });

  it('defaults: nobody approves, anyone requests, no self-approval, 2 approvals when protected, 30 min expiry, all three actions', () => {
    expect(definePolicy()).toEqual({
      requesters: ['*'],
      approvers: [],
      allowSelfApproval: false,
      protectedNamespaces: [],
      protectedApprovals: 2,
      actions: ['restart', 'recreate-serviceaccount', 'snooze'],
      namespaces: { allow: [], deny: [] },
      expiryMs: 30 * 60 * 1000,
    });
  });

  it('has the defaults the config fills in (one source: what `serve` runs with)', () => {
    const config = parseConfig(
      { slack: {}, clusters: [{ name: 'prod', audit: { file: { path: 'a.log' } }, slack: { channel: 'C0AAA', approvers: ['U0APPROVE1'] } }] },
      {},
    );
    expect(approvalPolicyFor(config.clusters[0]!, config)).toEqual(definePolicy({ approvers: ['U0APPROVE1'] }));
  });
});

describe('namespace patterns of the policy (the config grammar)', () => {
  const withProtected = (patterns: string[]) => () =>
    parseConfig({ slack: {}, clusters: [{ name: 'prod', audit: { file: { path: 'a.log' } }, slack: { channel: 'C0AAA', approvers: ['U01', 'U02'], protectedNamespaces: patterns } }] }, {});
  it('accepts prefix patterns ending in -* (as the config does) and rejects malformed ones', () => {
    expect(withProtected(['kube-*', 'prod*', '*', 'ci'])().clusters[0]!.slack?.protectedNamespaces).toEqual(['kube-*', 'prod*', '*', 'ci']);
    for (const bad of ['Kube-*', '*-system', 'a**', '-x']) expect(withProtected([bad]), bad).toThrow();
  });
});
