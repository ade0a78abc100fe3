import { describe, expect, it } from 'vitest';
import type { TokenUse } from '../../src/audit/types.js';
import type { SubjectState } from '../../src/cluster/types.js';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import {
  DEFAULT_CATALOG,
  classifyCause,
  parseVersion,
} from '../../src/findings/causes.js';
import { parseCatalog } from '../../src/findings/catalog-schema.js';
import catalogJson from '../../src/findings/catalog.json' with { type: 'json' };
import type { TokenRecord } from '../../src/findings/types.js';
import { DAY, container, pod, staleUse, subjectState, t, unauthorizedUse, workload } from './helpers.js';

const NOW = t('2022-07-21T15:00:00Z');
/** Token issued 83 days before NOW (+ a few hours): warnAfter = issue + 3607 s. */
const ISSUED = NOW - 83 * DAY - 5 * 3_600_000;
const WARN_AFTER = ISSUED + 3_607_000;
const MULTUS_UA = 'multus/v0.0.0 (linux/amd64) kubernetes/$Format';
const EKS_REG = '602401143452.dkr.ecr.us-west-2.amazonaws.com';

function records(uses: TokenUse[]): TokenRecord[] {
  const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
  for (const u of uses) agg.add(u);
  return agg.records();
}

/** One stale use at NOW of the token issued at ISSUED. */
function staleRecords(o: { ns?: string; sa?: string; pod?: string; ua?: string } = {}): TokenRecord[] {
  return records([
    staleUse({
      ns: o.ns ?? 'kube-system',
      sa: o.sa ?? 'multus',
      pod: o.pod ?? 'kube-multus-ds-zwh6w',
      time: NOW,
      secondsAfterWarning: (NOW - WARN_AFTER) / 1000,
      ua: o.ua ?? MULTUS_UA,
    }),
  ]);
}

/** State with one running pod (started with the token) running `containers`. */
function stateWith(containers: ReturnType<typeof container>[], o: Partial<Parameters<typeof pod>[0]> = {}): SubjectState {
  return subjectState({
    pods: [pod({ name: 'kube-multus-ds-zwh6w', startTime: ISSUED - 10_000, containers, hostPaths: ['/etc/cni/net.d', '/opt/cni/bin'], ...o })],
  });
}

const classify = (recs: TokenRecord[], state?: SubjectState, kind: TokenRecord['kind'] = 'stale-token') =>
  classifyCause({ kind, records: recs, now: NOW, ...(state ? { state } : {}) });

describe('catalog: Multus', () => {
  it('thin plugin v3 (EKS v3.7.2-eksbuild.1) → static-token-file, multus-thin, move to thick', () => {
    const image = `${EKS_REG}/eks/multus-cni:v3.7.2-eksbuild.1`;
    const cause = classify(staleRecords(), stateWith([container(image, { command: ['/entrypoint.sh'], args: ['--multus-conf-file=auto'] })]));
    expect(cause.id).toBe('static-token-file');
    expect(cause.component).toBe('multus-thin');
    expect(cause.evidence).toEqual([
      `image ${image} (thin plugin < v4)`,
      'token issued 83 days ago, pod kube-multus-ds-zwh6w started 83 days ago: issued at pod start and never renewed while the pod runs',
    ]);
    expect(cause.fix).toContain('thick plugin (multus-daemon');
    expect(cause.fix).toContain('only buys one more period');
    expect(cause.sources).toContain('https://github.com/aws/amazon-vpc-cni-k8s/issues/1868');
  });

  it('thin v3.9.2-eksbuild.1 is flagged too', () => {
    const cause = classify(staleRecords(), stateWith([container(`${EKS_REG}/eks/multus-cni:v3.9.2-eksbuild.1`)]));
    expect([cause.id, cause.component]).toEqual(['static-token-file', 'multus-thin']);
  });

  it('thin v4 without both flags → flagged', () => {
    const image = 'ghcr.io/k8snetworkplumbingwg/multus-cni:v4.0.2';
    const cause = classify(
      staleRecords(),
      stateWith([container(image, { command: ['/thin_entrypoint'], args: ['--multus-conf-file=auto'] })]),
    );
    expect([cause.id, cause.component]).toEqual(['static-token-file', 'multus-thin']);
    expect(cause.evidence[0]).toBe(
      `image ${image} (thin plugin v4 without --cleanup-config-on-exit=true and --multus-conf-file=auto)`,
    );
  });

  it('thin v4 with --cleanup-config-on-exit=true and --multus-conf-file=auto → not the Multus rule, and not the hostPath guess', () => {
    const image = 'ghcr.io/k8snetworkplumbingwg/multus-cni:v4.0.2';
    const cause = classify(
      staleRecords(),
      stateWith([
        container(image, {
          command: ['/thin_entrypoint'],
          args: ['--multus-conf-file=auto', '--cleanup-config-on-exit=true', '--cni-conf-dir=/host/etc/cni/net.d'],
        }),
      ]),
    );
    expect(cause.component).toBeNull();
    expect(cause.id).toBe('client-caches-token');
    expect(cause.evidence).toContain(
      `image ${image} runs with --cleanup-config-on-exit=true and --multus-conf-file=auto: thin plugin v4 with --cleanup-config-on-exit=true and --multus-conf-file=auto regenerates the kubeconfig when the token rotates`,
    );
    expect(cause.evidence.some((e) => e.includes('mounts hostPath'))).toBe(false);
  });

  it('thick plugin (EKS v4.0.2-eksbuild.1_thick, multus-daemon) is not flagged by the Multus rule', () => {
    const image = `${EKS_REG}/eks/multus-cni:v4.0.2-eksbuild.1_thick`;
    const cause = classify(
      staleRecords({ ua: 'multus-daemon/v0.0.0 (linux/amd64) kubernetes/$Format' }),
      stateWith([container(image, { command: ['/usr/src/multus-cni/bin/multus-daemon'] })]),
    );
    expect(cause.component).toBeNull();
    expect(cause.id).toBe('client-caches-token');
    expect(cause.evidence[0]).toBe(
      `image ${image}: thick plugin (multus-daemon): reads the projected token through client-go, no token file on the host`,
    );
  });

  it('without cluster state the user agent identifies the thin plugin; version unknown', () => {
    const cause = classify(staleRecords());
    expect([cause.id, cause.component]).toEqual(['static-token-file', 'multus-thin']);
    expect(cause.evidence[0]).toBe(
      `user agent "${MULTUS_UA}" identifies Multus CNI thin plugin; version unknown: no cluster state`,
    );
  });
});

describe('catalog: other known offenders', () => {
  const flux = (tag: string) =>
    classify(
      staleRecords({ ns: 'flux-system', sa: 'helm-controller', pod: 'helm-controller-5d8d-x', ua: 'helm-controller/v0.0.0 (linux/amd64) kubernetes/$Format' }),
      stateWith([container(`ghcr.io/fluxcd/helm-controller:${tag}`)], { name: 'helm-controller-5d8d-x', namespace: 'flux-system', hostPaths: [] }),
    );

  it('Flux helm-controller < v0.22.0 → client-caches-token; v0.22.0 is not flagged', () => {
    const old = flux('v0.21.0');
    expect([old.id, old.component]).toEqual(['client-caches-token', 'flux-helm-controller']);
    expect(old.evidence[0]).toBe('image ghcr.io/fluxcd/helm-controller:v0.21.0 (Flux helm-controller 0.21.0 < 0.22.0)');
    expect(old.sources).toEqual(['https://github.com/fluxcd/helm-controller/issues/479', 'https://github.com/fluxcd/helm-controller/issues/483']);
    const fixed = flux('v0.22.0');
    expect(fixed.component).toBeNull();
    expect(fixed.evidence).toContain('image ghcr.io/fluxcd/helm-controller:v0.22.0: version 0.22.0 is outside the affected versions of Flux helm-controller');
  });

  const fluentBit = (image: string) =>
    classify(
      staleRecords({ ns: 'logging', sa: 'fluent-bit', pod: 'fluent-bit-abcde', ua: 'Fluent-Bit' }),
      stateWith([container(image)], { name: 'fluent-bit-abcde', namespace: 'logging', hostPaths: ['/var/log'] }),
    );

  it('Fluent Bit < 1.9.4 → client-caches-token; 1.9.4 is not flagged', () => {
    const old = fluentBit('cr.fluentbit.io/fluent/fluent-bit:1.9.3');
    expect([old.id, old.component]).toEqual(['client-caches-token', 'fluent-bit']);
    expect(old.evidence[0]).toBe('image cr.fluentbit.io/fluent/fluent-bit:1.9.3 (Fluent Bit kubernetes filter 1.9.3 < 1.9.4)');
    expect(fluentBit('cr.fluentbit.io/fluent/fluent-bit:1.9.4').component).toBeNull();
  });

  it('aws-for-fluent-bit < 2.25.0 → client-caches-token; 2.25.0 is not flagged (the Fluent-Bit user agent is explained by the image)', () => {
    const old = fluentBit('public.ecr.aws/aws-observability/aws-for-fluent-bit:2.24.0');
    expect([old.id, old.component]).toEqual(['client-caches-token', 'aws-for-fluent-bit']);
    expect(old.evidence[0]).toBe(
      'image public.ecr.aws/aws-observability/aws-for-fluent-bit:2.24.0 (AWS for Fluent Bit 2.24.0 < 2.25.0)',
    );
    const fixed = fluentBit('public.ecr.aws/aws-observability/aws-for-fluent-bit:2.25.0');
    expect(fixed.component).toBeNull();
    expect(fixed.id).toBe('client-caches-token');
  });

  it('fluentd kubernetes_metadata filter → refresh-on-401', () => {
    const cause = classify(
      staleRecords({ ns: 'logging', sa: 'fluentd', pod: 'fluentd-x1', ua: 'rest-client/2.1.0 (linux x86_64) ruby/2.7.5p203' }),
      stateWith([container('fluent/fluentd-kubernetes-daemonset:v1.14-debian-elasticsearch7-1')], { name: 'fluentd-x1', namespace: 'logging' }),
    );
    expect([cause.id, cause.component]).toEqual(['refresh-on-401', 'fluentd-kubernetes-metadata']);
    expect(cause.fix).toContain('bearer_token_file');
    expect(cause.sources).toContain('https://github.com/fluent/fluentd-kubernetes-daemonset/issues/1368');
  });

  it('fabric8 client: version from its own user agent; < 6.1.0 and < 5.12.4 refresh only after 401', () => {
    const f = (ver: string) => classify(staleRecords({ ns: 'apps', sa: 'jobs', pod: 'jobs-1', ua: `fabric8-kubernetes-client/${ver}` }));
    expect([f('6.0.0').id, f('6.0.0').component]).toEqual(['refresh-on-401', 'fabric8-kubernetes-client']);
    expect(f('6.0.0').evidence[0]).toBe('user agent "fabric8-kubernetes-client/6.0.0" (fabric8 Kubernetes client (Java) 6.0.0 < 6.1.0)');
    expect(f('5.12.3').component).toBe('fabric8-kubernetes-client');
    expect(f('5.12.4').component).toBeNull();
    expect(f('6.1.0').component).toBeNull();
  });

  it('Python client < 12.0.0 by its OpenAPI-Generator user agent', () => {
    const p = (ua: string) => classify(staleRecords({ ns: 'apps', sa: 'py', pod: 'py-1', ua }));
    expect(p('OpenAPI-Generator/11.0.0/python').component).toBe('python-kubernetes-client');
    // 12.0.0 is past the official client's fix but is also what kubernetes_asyncio 12.0.0 sends (affected below 25.11.0).
    expect(p('OpenAPI-Generator/12.0.0/python').component).toBe('kubernetes-asyncio');
    expect(p('OpenAPI-Generator/25.11.0/python').component).toBeNull();
    expect(p('OpenAPI-Generator/1.0.0/java').component).toBeNull();
  });
});

describe('generic causes', () => {
  it('an unknown component gets client-caches-token with token age vs pod age and a generic fix', () => {
    const cause = classify(
      staleRecords({ ns: 'reports', sa: 'report-generator', pod: 'report-generator-7d9c-abcde', ua: 'report-generator/v0.0.0 (linux/amd64) kubernetes/$Format' }),
      stateWith([container('registry.example.com/acme/report:1.2.3')], {
        name: 'report-generator-7d9c-abcde',
        namespace: 'reports',
        hostPaths: [],
        ownerChain: [{ kind: 'ReplicaSet', namespace: 'reports', name: 'report-generator-7d9c' }, { kind: 'Deployment', namespace: 'reports', name: 'report-generator' }],
      }),
    );
    expect(cause).toEqual({
      id: 'client-caches-token',
      component: null,
      summary:
        'The client read the ServiceAccount token once and keeps presenting it; the kubelet rotates the projected token file about hourly, but the process never re-reads it.',
      fix: expect.stringContaining('Upgrade the client library to one that re-reads the token file'),
      evidence: [
        'token issued 83 days ago, pod report-generator-7d9c-abcde started 83 days ago: issued at pod start and never renewed while the pod runs',
        '1 stale token in use, up to 7185593 s (83 days) past the warnafter point',
        'user agent "report-generator/v0.0.0 (linux/amd64) kubernetes/$Format"',
        'image registry.example.com/acme/report:1.2.3',
      ],
      sources: [
        'https://docs.aws.amazon.com/eks/latest/userguide/service-accounts.html',
        'https://github.com/kubernetes/enhancements/blob/master/keps/sig-auth/1205-bound-service-account-tokens/README.md',
      ],
    });
    expect(cause.fix).toContain('only buys one more period');
  });

  it('a token issued well after pod start: the client took a later token once', () => {
    const cause = classify(
      staleRecords({ ns: 'apps', sa: 'x', pod: 'x-1', ua: 'x/v0.0.0' }),
      stateWith([container('acme/x:1.0')], { name: 'x-1', namespace: 'apps', hostPaths: [], startTime: ISSUED - 10 * DAY }),
    );
    expect(cause.evidence[0]).toBe('token issued 83 days ago, pod x-1 started 93 days ago: the client took a later token once, then kept it');
  });

  it('an unknown CNI plugin mounting /etc/cni/net.d → static-token-file', () => {
    const cause = classify(
      staleRecords({ ns: 'kube-system', sa: 'acme-cni', pod: 'acme-cni-xyz', ua: 'acme-cni/v0.0.0' }),
      stateWith([container('acme/cni:2.0')], { name: 'acme-cni-xyz' }),
    );
    expect([cause.id, cause.component]).toEqual(['static-token-file', null]);
    expect(cause.evidence[0]).toBe('pod acme-cni-xyz mounts hostPath /etc/cni/net.d (CNI plugins write a kubeconfig holding the token there)');
  });

  it('a token of a pod that is gone is not by itself evidence of a token file outside the pod', () => {
    const cause = classify(
      staleRecords({ ns: 'apps', sa: 'agent', pod: 'agent-old', ua: 'agent/v0.0.0' }),
      subjectState({ pods: [pod({ name: 'agent-new', namespace: 'apps', startTime: NOW - DAY, containers: [container('acme/agent:3.1')] })] }),
    );
    expect([cause.id, cause.component]).toEqual(['client-caches-token', null]);
    expect(cause.evidence.join(' ')).not.toContain('outside the pod');
  });

  it('without cluster state an unknown stale client is client-caches-token with what the audit log says', () => {
    const cause = classify(staleRecords({ ns: 'apps', sa: 'x', pod: 'x-1', ua: 'x/v0.0.0' }));
    expect(cause.id).toBe('client-caches-token');
    expect(cause.evidence).toEqual(['1 stale token in use, up to 7185593 s (83 days) past the warnafter point', 'user agent "x/v0.0.0"']);
  });

  it('legacy token → legacy-secret-token with the Secret and its last-used label', () => {
    const recs = records([
      {
        kind: 'legacy',
        auditID: 'l1',
        time: NOW,
        subject: 'system:serviceaccount:ci:deployer',
        sourceIPs: ['10.1.2.3'],
        userAgent: 'kubectl/v1.29.0',
        legacySecret: { name: 'deployer-token-abc', kind: 'autogenerated' },
      },
    ]);
    const cause = classifyCause({
      kind: 'legacy-token',
      records: recs,
      now: NOW,
      state: subjectState({ legacySecrets: [{ namespace: 'ci', name: 'deployer-token-abc', serviceAccount: 'deployer', lastUsed: '2022-07-21' }] }),
    });
    expect(cause.id).toBe('legacy-secret-token');
    expect(cause.evidence).toEqual([
      'Secret ci/deployer-token-abc: legacy token autogenerated (annotation authentication.k8s.io/legacy-token-autogenerated-secret), used 1 times, last at 2022-07-21T15:00:00.000Z',
      'Secret ci/deployer-token-abc label kubernetes.io/legacy-token-last-used: 2022-07-21',
      'requests came from source IP 10.1.2.3',
      'user agent "kubectl/v1.29.0"',
    ]);
  });

  it('unattributed 401s from an unknown client → unknown; the attribution is evidence', () => {
    const recs = records([unauthorizedUse({ time: NOW, ip: '10.9.9.9', ua: 'curl/8.0' })]);
    const cause = classify(recs, undefined, 'unauthorized');
    expect(cause.id).toBe('unknown');
    expect(cause.evidence).toEqual([
      'unattributed: no stale use came from source IP 10.9.9.9 with user agent curl/8.0',
      'user agent "curl/8.0"',
    ]);
  });

  it('attributed 401s carry the inferred attribution and the cause of the subject', () => {
    const recs = records([
      staleUse({ pod: 'kube-multus-ds-zwh6w', time: NOW - 3_600_000, secondsAfterWarning: 7_776_000 }),
      unauthorizedUse({ time: NOW, ip: '192.168.1.10', ua: MULTUS_UA }),
    ]);
    const cause = classify(recs, undefined, 'unauthorized');
    expect(cause.component).toBe('multus-thin');
    expect(cause.evidence).toContain(
      `inferred: same source IP 192.168.1.10 and user agent ${MULTUS_UA} as stale uses of system:serviceaccount:kube-system:multus`,
    );
  });

  it('uses workload template images when no pod is running', () => {
    const cause = classify(
      staleRecords(),
      subjectState({ workloads: [workload({ name: 'kube-multus-ds', images: [`${EKS_REG}/eks/multus-cni:v3.8.0-eksbuild.1`] })] }),
    );
    expect(cause.component).toBe('multus-thin');
    expect(cause.evidence[0]).toBe(`image ${EKS_REG}/eks/multus-cni:v3.8.0-eksbuild.1 (thin plugin < v4)`);
  });
});

describe('catalog data', () => {
  it('every entry has at least one source URL and a fix, and ids are unique', () => {
    expect(DEFAULT_CATALOG.entries.length).toBeGreaterThanOrEqual(15);
    for (const e of DEFAULT_CATALOG.entries) {
      expect(e.sources.length, e.id).toBeGreaterThan(0);
      for (const s of e.sources) expect(s, e.id).toMatch(/^https:\/\/(github\.com|docs\.aws\.amazon\.com|issues\.apache\.org)\//);
      expect(e.fix.length, e.id).toBeGreaterThan(20);
      expect(e.summary.length, e.id).toBeGreaterThan(20);
    }
    expect(new Set(DEFAULT_CATALOG.entries.map((e) => e.id)).size).toBe(DEFAULT_CATALOG.entries.length);
  });

  it('parseCatalog rejects an entry without sources, a bad regex and duplicate ids', () => {
    const entry = DEFAULT_CATALOG.entries[0]!;
    expect(() => parseCatalog({ version: 1, entries: [{ ...entry, sources: [] }] })).toThrow(/invalid cause catalog[\s\S]*sources/);
    expect(() => parseCatalog({ version: 1, entries: [{ ...entry, match: { userAgentVersion: '(' } }] })).toThrow(
      /not a valid regular expression/,
    );
    expect(() => parseCatalog({ version: 1, entries: [entry, entry] })).toThrow('duplicate entry id "multus-thin-v3"');
    // The built-in catalog is used unvalidated at run time (no zod at start-up): it must be exactly what validates.
    expect(parseCatalog(catalogJson)).toEqual(DEFAULT_CATALOG);
  });
});

describe('versions', () => {
  it('parses image tags', () => {
    expect(parseVersion('v3.7.2-eksbuild.1')).toEqual([3, 7, 2]);
    expect(parseVersion('v4.0.2-eksbuild.1_thick')).toEqual([4, 0, 2]);
    expect(parseVersion('1.9.3-debug')).toEqual([1, 9, 3]);
    expect(parseVersion('2.31.12.20231011')).toEqual([2, 31, 12]);
    expect(parseVersion('release-3.22')).toEqual([3, 22]);
    expect(parseVersion('latest')).toBeUndefined();
  });
});
