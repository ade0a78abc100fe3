import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  approvalPolicySchema,
  DEFAULT_EXPIRY_MS,
  definePolicy,
  isListed,
  matchesNamespace,
  namespaceAllowed,
  requiredApprovalsFor,
  resolveMembers,
} from '../../src/approvals/policy.js';

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

  it('defaults: nobody approves, anyone requests, no self-approval, 30 min expiry, restart and snooze', () => {
    expect(definePolicy()).toEqual({
      requesters: ['*'],
      approvers: [],
      allowSelfApproval: false,
      protectedNamespaces: [],
      protectedApprovals: 2,
      actions: ['restart', 'snooze'],
      namespaces: { allow: [], deny: [] },
      expiryMs: 30 * 60 * 1000,
    });
  });
});

describe('approvalPolicySchema', () => {
  it('fills defaults', () => {
    expect(approvalPolicySchema.parse({ approvers: ['S0OPS00001'] })).toEqual({ ...definePolicy({ approvers: ['S0OPS00001'] }), expiryMs: DEFAULT_EXPIRY_MS });
  });

  it('reports every bad field at once', () => {
    const r = approvalPolicySchema.safeParse({ approvers: ['*', 'alice'], requesters: ['U0AAAAAAA1', 'bob'], protectedNamespaces: ['Kube System'], expiryMs: -1 });
    expect(r.success).toBe(false);
    const paths = r.success ? [] : r.error.issues.map((i) => i.path.join('.'));
    expect(paths.sort()).toEqual(['approvers.0', 'approvers.1', 'expiryMs', 'protectedNamespaces.0', 'requesters.1']);
    expect(r.success ? '' : z.prettifyError(r.error)).toContain('must be a Slack user id (U…/W…) or user-group id (S…)');
  });

  it('requires at least one approver', () => {
    const r = approvalPolicySchema.safeParse({ approvers: [] });
    expect(r.success ? '' : r.error.issues[0]?.message).toBe('at least one approver (user or user group) is required');
  });
});

describe('approvalPolicySchema namespace patterns', () => {
  it('accepts prefix patterns ending in -* (as the config does) and rejects malformed ones', () => {
    const ok = approvalPolicySchema.safeParse({ approvers: ['U01'], protectedNamespaces: ['kube-*', 'prod*', '*', 'ci'] });
    expect(ok.success).toBe(true);
    for (const bad of ['Kube-*', '*-system', 'a**', '-x']) {
      expect(approvalPolicySchema.safeParse({ approvers: ['U01'], protectedNamespaces: [bad] }).success, bad).toBe(false);
    }
  });
});
