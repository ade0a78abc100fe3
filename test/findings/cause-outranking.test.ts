/**
 * Cluster evidence outranks a version rule (Calico with CALICO_MANAGE_CNI=false), and user agents that two libraries
 * send (OpenAPI-Generator/<v>/python) or that carry the version (fluent-bit/1.8.3). Values come from the public reports:
 * projectcalico/calico#6546, tomplus/kubernetes_asyncio#253, fluent/fluent-bit#4352.
 */
import { describe, expect, it } from 'vitest';
import { TokenAggregator } from '../../src/findings/aggregate.js';
import { DEFAULT_CATALOG, OWN_TOKEN_FIX, classifyCause } from '../../src/findings/causes.js';
import { parseCatalog } from '../../src/findings/catalog-schema.js';
import type { TokenRecord } from '../../src/findings/types.js';
import type { TokenUse } from '../../src/audit/types.js';
import { container, pod, staleUse, subjectState, t } from './helpers.js';

const NOW = t('2023-01-10T12:00:00Z');

function records(uses: TokenUse[]): TokenRecord[] {
  const agg = new TokenAggregator({ cluster: 'prod', maxTokenAge: { mode: 'eks' } });
  for (const u of uses) agg.add(u);
  return agg.records();
}

describe('Calico 3.24.5 with CALICO_MANAGE_CNI=false (projectcalico/calico#6546)', () => {
  const calicoPod = (env: Record<string, string>) =>
    pod({
      namespace: 'kube-system',
      name: 'calico-node-7xk2p',
      serviceAccount: 'calico-node',
      startTime: NOW - 3 * 86_400_000,
      ownerChain: [{ kind: 'DaemonSet', namespace: 'kube-system', name: 'calico-node' }],
      hostPaths: ['/etc/cni/net.d', '/opt/cni/bin'],
      containers: [
        container('docker.io/calico/cni:v3.24.5', { name: 'install-cni', init: true }),
        container('docker.io/calico/node:v3.24.5', { name: 'calico-node', env }),
      ],
    });
  // The CNI plugin presents the token of /etc/cni/net.d/calico-kubeconfig two days after calico-node started.
  const recs = records([
    staleUse({ ns: 'kube-system', sa: 'calico-node', pod: 'calico-node-7xk2p', time: NOW, secondsAfterWarning: 2 * 86_400, ua: 'calico/v0.0.0 (linux/amd64) kubernetes/$Format' }),
  ]);

  it('the env that switches the fix off outranks the fixed version: static token file, with the setting and its source', () => {
    const cause = classifyCause({ kind: 'stale-token', records: recs, now: NOW, state: subjectState({ pods: [calicoPod({ CALICO_MANAGE_CNI: 'false' })] }) });
    expect(cause.id).toBe('static-token-file');
    expect(cause.component).toBe('calico-cni');
    expect(cause.evidence[0]).toContain('Calico CNI plugin 3.24.5 has the fix');
    expect(cause.evidence[0]).toContain('sets CALICO_MANAGE_CNI=false');
    expect(cause.evidence[0]).toContain('https://github.com/projectcalico/calico/issues/6546');
    expect(cause.fix).toContain('Set CALICO_MANAGE_CNI=true');
    expect(cause.fix).not.toContain('90 days');
    expect(cause.fix).not.toBe(OWN_TOKEN_FIX);
    expect(cause.sources).toContain('https://github.com/projectcalico/calico/issues/6546');
  });

  it('without the setting, the hostPath into /etc/cni still outranks the version rule: not "the application keeps a token"', () => {
    const cause = classifyCause({ kind: 'stale-token', records: recs, now: NOW, state: subjectState({ pods: [calicoPod({ CALICO_MANAGE_CNI: 'true' })] }) });
    expect(cause.id).toBe('static-token-file');
    expect(cause.fix).not.toBe(OWN_TOKEN_FIX);
    expect(cause.evidence).toContain('pod calico-node-7xk2p mounts hostPath /etc/cni/net.d (CNI plugins write a kubeconfig holding the token there)');
  });

  it('every catalog entry with a "fix undone by" setting names it with a public source', () => {
    const parsed = parseCatalog(DEFAULT_CATALOG);
    const undone = parsed.entries.filter((e) => e.fixUndoneBy);
    expect(undone.map((e) => e.id)).toContain('calico-cni');
    for (const e of undone) for (const u of e.fixUndoneBy!) expect(u.source).toMatch(/^https:\/\//);
  });

  it('the catalog schema refuses a setting naming both env and arg', () => {
    const bad = structuredClone(DEFAULT_CATALOG) as unknown as { entries: { fixUndoneBy?: unknown[] }[] };
    bad.entries[0]!.fixUndoneBy = [{ env: 'A', arg: '--a', values: ['x'], note: 'n', fix: 'f', source: 'https://example.org/' }];
    expect(() => parseCatalog(bad)).toThrow(/exactly one of env or arg/);
  });
});

describe('user agents two libraries send, and versions in the user agent', () => {
  const classifyUa = (ua: string) =>
    classifyCause({
      kind: 'stale-token',
      records: records([staleUse({ ns: 'apps', sa: 'worker', pod: 'worker-1', time: NOW, secondsAfterWarning: 86_400, ua })]),
      now: NOW,
    });

  it('OpenAPI-Generator/24.2.1/python: ambiguous, affected if it is kubernetes_asyncio (< 25.11.0), with both fixes', () => {
    const cause = classifyUa('OpenAPI-Generator/24.2.1/python');
    expect(cause.id).toBe('client-caches-token');
    expect(cause.component).toBe('kubernetes-asyncio');
    expect(cause.evidence[0]).toBe('user agent "OpenAPI-Generator/24.2.1/python" (kubernetes_asyncio (Python) 24.2.1 < 25.11.0)');
    expect(cause.evidence[1]).toMatch(/^ambiguous: affected if this is kubernetes_asyncio/);
    expect(cause.evidence[1]).toContain('Kubernetes Python client 24.2.1');
    expect(cause.fix).toContain('25.11.0');
    expect(cause.fix).toContain('If it is Kubernetes Python client');
    expect(cause.sources).toContain('https://github.com/tomplus/kubernetes_asyncio/issues/253');
  });

  it('OpenAPI-Generator/11.0.0/python: the official client < 12.0.0, and kubernetes_asyncio would be affected too', () => {
    const cause = classifyUa('OpenAPI-Generator/11.0.0/python');
    expect(cause.component).toBe('python-kubernetes-client');
    expect(cause.evidence[0]).toBe('user agent "OpenAPI-Generator/11.0.0/python" (Kubernetes Python client 11.0.0 < 12.0.0)');
    expect(cause.evidence[1]).toContain('also what kubernetes_asyncio (Python) 11.0.0 sends, which is affected too');
    expect(cause.fix).toContain('12.0.0');
    expect(cause.fix).toContain('25.11.0');
  });

  it('OpenAPI-Generator/26.1.0/python: past both fixes, the application keeps its own token', () => {
    const cause = classifyUa('OpenAPI-Generator/26.1.0/python');
    expect(cause.component).toBeNull();
    expect(cause.fix).toBe(OWN_TOKEN_FIX);
  });

  it('fluent-bit/1.8.3 reads the version: 1.8.3 < 1.9.4', () => {
    const cause = classifyUa('fluent-bit/1.8.3');
    expect(cause.component).toBe('fluent-bit');
    expect(cause.evidence[0]).toBe('user agent "fluent-bit/1.8.3" (Fluent Bit kubernetes filter 1.8.3 < 1.9.4)');
  });

  it('plain Fluent-Bit (no version) still identifies Fluent Bit, version unknown', () => {
    const cause = classifyUa('Fluent-Bit');
    expect(cause.component).toBe('fluent-bit');
    expect(cause.evidence[0]).toBe('user agent "Fluent-Bit" identifies Fluent Bit kubernetes filter; version unknown: no cluster state');
  });
});
