/**
 * On a cluster without token extension, 401s attributed to one pod by address and user agent are corroborated when
 * they start when that pod's first token expired (3607 s after the pod started), and only then.
 */
import { describe, expect, it } from 'vitest';
import { expiryCorroboration, UNEXTENDED_TOKEN_LIFETIME_MS } from '../../src/findings/build.js';
import type { TokenRecord } from '../../src/findings/types.js';

const START = Date.parse('2026-11-20T11:22:19Z');
const state = { getPod: async (_ns: string, name: string) => (name === 'kube-multus-ds-452jg' ? { namespace: 'kube-system', name, startTime: START } : undefined) } as never;

function record(firstSeen: number, pod = 'kube-multus-ds-452jg'): TokenRecord {
  return {
    cluster: 'c',
    kind: 'unauthorized',
    subject: '',
    namespace: 'kube-system',
    serviceAccount: 'multus',
    pod,
    requests: 3,
    firstSeen,
    lastSeen: firstSeen + 60_000,
    sourceIPs: ['192.168.23.87'],
    userAgents: ['multus/v0.0.0 (linux/amd64) kubernetes/$Format'],
    attribution: 'inferred: by source IP',
  } as unknown as TokenRecord;
}

describe('expiryCorroboration', () => {
  it('corroborates 401s that start when the pod’s first token expired', async () => {
    const r = await expiryCorroboration([record(START + UNEXTENDED_TOKEN_LIFETIME_MS + 20_000)], state);
    expect(r?.basis).toBe('corroborated');
    expect(r?.text).toContain('3627 s after pod kube-multus-ds-452jg started');
  });

  it('does not corroborate 401s that start long after (or before) that moment, of an unknown pod, or without cluster state', async () => {
    expect(await expiryCorroboration([record(START + 14 * 86_400_000)], state)).toBeUndefined();
    expect(await expiryCorroboration([record(START + 30 * 60_000)], state)).toBeUndefined();
    expect(await expiryCorroboration([record(START + UNEXTENDED_TOKEN_LIFETIME_MS, 'other-pod')], state)).toBeUndefined();
    expect(await expiryCorroboration([record(START + UNEXTENDED_TOKEN_LIFETIME_MS)], undefined)).toBeUndefined();
  });
});
