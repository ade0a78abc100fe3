import { describe, expect, it } from 'vitest';
import type { TokenUse } from '../../src/audit/types.js';
import { TokenAggregator, UNATTRIBUTED, hourKey, parseServiceAccountSubject } from '../../src/findings/aggregate.js';
import { staleUse, t, unauthorizedUse } from './helpers.js';

const W = t('2022-04-29T11:38:39Z');
const MULTUS_UA = 'multus/v0.0.0 (linux/amd64) kubernetes/$Format';
const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
const eks = () => new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });

/** A stale use of pod `pod` whose computed warnAfter is W + offsetS seconds, seen `ageS` s after it. */
const use = (pod: string, offsetS: number, ageS = 1_728_000, extra: Partial<Parameters<typeof staleUse>[0]> = {}) =>
  staleUse({ pod, time: W + (offsetS + ageS) * 1000, secondsAfterWarning: ageS, ...extra });

describe('TokenAggregator: stale tokens', () => {
  it('groups uses of one pod whose warnAfter lies within ±60 s into one token, keeping the earliest warnAfter', () => {
    const agg = eks();
    agg.add(use('kube-multus-ds-zwh6w', 0, 1_728_000));
    agg.add(use('kube-multus-ds-zwh6w', 5, 1_728_100));
    agg.add(use('kube-multus-ds-zwh6w', -30, 1_728_200));
    const [r, ...rest] = agg.records();
    expect(rest).toEqual([]);
    expect(r).toMatchObject({
      cluster: 'prod',
      kind: 'stale-token',
      subject: 'system:serviceaccount:kube-system:multus',
      namespace: 'kube-system',
      serviceAccount: 'multus',
      pod: 'kube-multus-ds-zwh6w',
      requests: 3,
      maxSecondsAfterWarning: 1_728_200,
      userAgents: [MULTUS_UA],
      sourceIPs: ['192.168.1.10'],
    });
    expect(iso(r!.warnAfter)).toBe('2022-04-29T11:38:09.000Z');
    expect(iso(r!.rejectionAt)).toBe('2022-07-28T11:38:09.000Z');
    expect(iso(r!.firstSeen)).toBe('2022-05-19T11:38:39.000Z');
    expect(iso(r!.lastSeen)).toBe('2022-05-19T11:41:29.000Z');
  });

  it('60 s away joins the token, 61 s away is a new token of the same pod', () => {
    const agg = eks();
    agg.add(use('p', 0));
    agg.add(use('p', 60));
    agg.add(use('p', 61));
    const rs = agg.records();
    expect(rs.map((r) => [iso(r.warnAfter), r.requests])).toEqual([
      ['2022-04-29T11:38:39.000Z', 2],
      ['2022-04-29T11:39:40.000Z', 1],
    ]);
  });

  it('a new warnAfter for the same pod is a new token; another pod is another token', () => {
    const agg = eks();
    agg.add(use('a', 0));
    agg.add(use('a', 86_400));
    agg.add(use('b', 0));
    expect(agg.records().map((r) => [r.pod, iso(r.warnAfter)])).toEqual([
      ['a', '2022-04-29T11:38:39.000Z'],
      ['a', '2022-04-30T11:38:39.000Z'],
      ['b', '2022-04-29T11:38:39.000Z'],
    ]);
  });

  it('groups by pod uid when known', () => {
    const agg = eks();
    agg.add(use('web-0', 0, 1000, { podUid: 'uid-1' }));
    agg.add(use('web-0', 0, 1000, { podUid: 'uid-2' }));
    expect(agg.records().map((r) => r.podUid)).toEqual(['uid-1', 'uid-2']);
  });

  it('counts requests per UTC hour and bounds user agents and source IPs to 20', () => {
    const agg = eks();
    for (let i = 0; i < 25; i++) {
      agg.add(staleUse({ pod: 'p', time: t('2022-05-19T11:30:00Z') + i * 60_000, secondsAfterWarning: 1000 + i * 60, ip: `10.0.0.${i}`, ua: `ua/${i}` }));
    }
    const [r] = agg.records();
    expect(r!.hourly).toEqual({ [hourKey(t('2022-05-19T11:30:00Z'))]: 25 });
    expect(r!.sourceIPs).toHaveLength(20);
    expect(r!.sourceIPs[19]).toBe('10.0.0.19');
    expect(r!.userAgents).toHaveLength(20);
  });

  it('splits hourly counts on the UTC hour', () => {
    const agg = eks();
    agg.add(staleUse({ pod: 'p', time: t('2022-05-19T11:59:59Z'), secondsAfterWarning: 100 }));
    agg.add(staleUse({ pod: 'p', time: t('2022-05-19T12:00:00Z'), secondsAfterWarning: 101 }));
    agg.add(staleUse({ pod: 'p', time: t('2022-05-19T12:30:00Z'), secondsAfterWarning: 1901 }));
    expect(agg.records()[0]!.hourly).toEqual({
      [String(t('2022-05-19T11:00:00Z'))]: 1,
      [String(t('2022-05-19T12:00:00Z'))]: 2,
    });
  });

  it('counts a weighted use (Logs Insights aggregate row) as that many requests', () => {
    const agg = eks();
    agg.add({ ...use('p', 0), weight: 40 });
    agg.add(use('p', 2));
    agg.add({ ...use('p', 3), weight: 0 }); // not a positive integer: counts once
    const [r] = agg.records();
    expect(r!.requests).toBe(42);
    expect(Object.values(r!.hourly)).toEqual([42]);
  });

  it('counts and skips a use without a valid time', () => {
    const agg = eks();
    agg.add({ ...use('p', 0), time: Number.NaN });
    expect(agg.invalid).toBe(1);
    expect(agg.records()).toEqual([]);
  });
});

describe('TokenAggregator: legacy tokens', () => {
  const legacy = (time: number, secret: TokenUse['legacySecret']): TokenUse => ({
    kind: 'legacy',
    auditID: `l-${time}`,
    time,
    subject: 'system:serviceaccount:ci:deployer',
    sourceIPs: ['10.1.2.3'],
    userAgent: 'kubectl/v1.29.0',
    ...(secret ? { legacySecret: secret } : {}),
  });

  it('groups by (subject, Secret) and keeps the invalidated mark', () => {
    const agg = eks();
    agg.add(legacy(t('2024-01-01T00:00:00Z'), { name: 'deployer-token-abc', kind: 'autogenerated' }));
    agg.add(legacy(t('2024-01-02T00:00:00Z'), { name: 'deployer-token-abc', namespace: 'ci', kind: 'invalidated' }));
    agg.add(legacy(t('2024-01-03T00:00:00Z'), { name: 'other', kind: 'manual' }));
    const rs = agg.records();
    expect(rs.map((r) => [r.kind, r.namespace, r.serviceAccount, r.legacySecret, r.requests])).toEqual([
      ['legacy-token', 'ci', 'deployer', { name: 'deployer-token-abc', kind: 'invalidated', namespace: 'ci' }, 2],
      ['legacy-token', 'ci', 'deployer', { name: 'other', kind: 'manual' }, 1],
    ]);
    expect(rs[0]!.warnAfter).toBeUndefined();
    expect(rs[0]!.rejectionAt).toBeUndefined();
  });
});

describe('TokenAggregator: 401 attribution', () => {
  const stale = () => use('kube-multus-ds-zwh6w', 0);
  const rejected = (ip: string, ua = MULTUS_UA, time = t('2022-07-28T12:00:00Z')) => unauthorizedUse({ time, ip, ua });

  it('attributes 401s to the subject of stale uses from the same source IP and user agent, saying it is inferred', () => {
    for (const order of ['stale first', '401 first']) {
      const agg = eks();
      if (order === 'stale first') agg.add(stale());
      agg.add(rejected('192.168.1.10'));
      agg.add(rejected('192.168.1.10', MULTUS_UA, t('2022-07-28T12:05:00Z')));
      if (order === '401 first') agg.add(stale());
      const u = agg.records().filter((r) => r.kind === 'unauthorized');
      expect(u).toHaveLength(1);
      expect(u[0]).toMatchObject({
        subject: 'system:serviceaccount:kube-system:multus',
        namespace: 'kube-system',
        serviceAccount: 'multus',
        requests: 2,
        attribution:
          'inferred: same source IP 192.168.1.10 and user agent multus/v0.0.0 (linux/amd64) kubernetes/$Format as stale uses of system:serviceaccount:kube-system:multus',
      });
    }
  });

  it('keeps unattributable 401s as an (unattributed) record', () => {
    const agg = eks();
    agg.add(stale());
    agg.add(rejected('10.0.0.9', 'curl/8.0'));
    agg.add(rejected('192.168.1.10', 'curl/8.0')); // right IP, other user agent
    const u = agg.records().filter((r) => r.kind === 'unauthorized');
    expect(u.map((r) => [r.subject, r.namespace, r.serviceAccount, r.sourceIPs, r.attribution])).toEqual([
      [UNATTRIBUTED, UNATTRIBUTED, UNATTRIBUTED, ['10.0.0.9'], 'unattributed: no stale use came from source IP 10.0.0.9 with user agent curl/8.0'],
      [UNATTRIBUTED, UNATTRIBUTED, UNATTRIBUTED, ['192.168.1.10'], 'unattributed: no stale use came from source IP 192.168.1.10 with user agent curl/8.0'],
    ]);
    expect(UNATTRIBUTED).toBe('(unattributed)');
  });

  it('does not guess between two subjects seen from the same source', () => {
    const agg = eks();
    agg.add(stale());
    agg.add(staleUse({ ns: 'kube-system', sa: 'whereabouts', pod: 'wb-1', time: W + 2_000_000_000, secondsAfterWarning: 2_000_000 }));
    agg.add(rejected('192.168.1.10'));
    const [u] = agg.records().filter((r) => r.kind === 'unauthorized');
    expect(u!.subject).toBe(UNATTRIBUTED);
    expect(u!.attribution).toBe(
      'unattributed: source IP 192.168.1.10 and user agent multus/v0.0.0 (linux/amd64) kubernetes/$Format match stale uses of several subjects (system:serviceaccount:kube-system:multus, system:serviceaccount:kube-system:whereabouts)',
    );
  });
});

describe('TokenAggregator: incremental (live store)', () => {
  it('from(records) + later uses gives the same records as one run', () => {
    const uses: TokenUse[] = [
      use('a', 0),
      use('a', 3, 1_728_500),
      use('b', 0),
      unauthorizedUse({ time: t('2022-07-28T12:00:00Z'), ip: '192.168.1.10', ua: MULTUS_UA }),
      use('a', 86_400),
      unauthorizedUse({ time: t('2022-07-28T13:00:00Z'), ip: '192.168.1.10', ua: MULTUS_UA }),
      use('a', -20, 1_729_000),
    ];
    const once = eks();
    for (const u of uses) once.add(u);

    const first = eks();
    for (const u of uses.slice(0, 4)) first.add(u);
    const later = TokenAggregator.from({ cluster: 'prod', maxTokenAge: { mode: 'eks' } }, first.records());
    for (const u of uses.slice(4)) later.add(u);

    expect(later.records()).toEqual(once.records());
    expect(later.records().map((r) => [r.kind, r.pod ?? null, r.requests])).toEqual([
      ['stale-token', 'a', 3],
      ['stale-token', 'a', 1],
      ['stale-token', 'b', 1],
      ['unauthorized', null, 2],
    ]);
  });

  it('recomputes rejectionAt with the current rule when reloading', () => {
    const agg = eks();
    agg.add(use('a', 0));
    const up = TokenAggregator.from({ cluster: 'prod', maxTokenAge: { mode: 'upstream' } }, agg.records());
    expect(iso(up.records()[0]!.rejectionAt)).toBe('2023-04-29T10:38:32.000Z');
  });
});

describe('parseServiceAccountSubject', () => {
  it('splits system:serviceaccount:<ns>:<name> only', () => {
    expect(parseServiceAccountSubject('system:serviceaccount:kube-system:multus')).toEqual({ namespace: 'kube-system', serviceAccount: 'multus' });
    expect(parseServiceAccountSubject('system:node:ip-10-0-0-1')).toBeUndefined();
    expect(parseServiceAccountSubject('system:serviceaccount:ns')).toBeUndefined();
  });
});
