/**
 * A fleet kubeconfig loads once (src/cluster/kube.ts KubeconfigFiles): with one file of 300 contexts, the file is read
 * (counted through the loader's read seam) and parsed once, and each cluster's `KubeConfig` holds its own context,
 * cluster and user only — usable against the loopback fake API server. A missing context names the ones available;
 * relative file paths resolve against the kubeconfig's folder; a file that does not parse fails every cluster naming
 * it without quoting its content.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeconfigFiles, kubeConfigFor } from '../../src/cluster/kube.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';

let kube: FakeKube | undefined;
afterEach(async () => {
  await kube?.close();
  kube = undefined;
});

/** A kubeconfig of `n` contexts `ctx-<i>` → cluster `c-<i>` at `server(i)` → user `u-<i>` with token `token-<i>`. */
function fleetKubeconfig(n: number, server: (i: number) => string): string {
  const clusters: string[] = [];
  const users: string[] = [];
  const contexts: string[] = [];
  for (let i = 0; i < n; i++) {
    clusters.push(`- name: c-${i}\n  cluster:\n    server: ${server(i)}\n    certificate-authority: certs/ca-${i}.crt`);
    users.push(`- name: u-${i}\n  user:\n    token: token-${i}`);
    contexts.push(`- name: ctx-${i}\n  context:\n    cluster: c-${i}\n    user: u-${i}`);
  }
  return `apiVersion: v1\nkind: Config\nclusters:\n${clusters.join('\n')}\nusers:\n${users.join('\n')}\ncontexts:\n${contexts.join('\n')}\ncurrent-context: ctx-0\n`;
}

describe('KubeconfigFiles', () => {
  it('reads and parses a file of 300 contexts once; each cluster gets its own context, cluster and user', async () => {
    kube = await startFakeKube({ objects: [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system' } }] });
    const dir = mkdtempSync(join(tmpdir(), 'tw-kubeconfig-'));
    const path = join(dir, 'fleet.yaml');
    writeFileSync(path, fleetKubeconfig(300, (i) => (i === 150 ? kube!.url : `https://cluster-${i}.example.test:6443`)));
    const reads: string[] = [];
    const files = new KubeconfigFiles((p) => {
      reads.push(p);
      return readFileSync(p, 'utf8');
    });

    const configs = Array.from({ length: 300 }, (_, i) => kubeConfigFor({ kubeconfig: path, context: `ctx-${i}` }, files));
    expect(reads).toEqual([path]);
    configs.forEach((kc, i) => {
      expect(kc.getCurrentContext()).toBe(`ctx-${i}`);
      expect(kc.getContexts().map((c) => c.name)).toEqual([`ctx-${i}`]);
      expect(kc.getClusters().map((c) => c.name)).toEqual([`c-${i}`]);
      expect(kc.getCurrentUser()?.token).toBe(`token-${i}`);
      // Relative paths resolve against the kubeconfig's folder, as client-node's loadFromFile does.
      expect(kc.getCurrentCluster()?.caFile).toBe(join(dir, 'certs', `ca-${i}.crt`));
    });
    // The default context is the file's current-context.
    expect(files.forContext(path).getCurrentContext()).toBe('ctx-0');
    expect(reads).toHaveLength(1);

    // The one pointing at the loopback fake API server works as a client.
    const kc = configs[150]!;
    kc.clusters[0] = { ...kc.clusters[0]!, caFile: undefined, skipTLSVerify: true };
    const ns = await kc.makeApiClient(CoreV1Api).readNamespace({ name: 'kube-system' });
    expect(ns.metadata?.name).toBe('kube-system');
  });

  it('a missing context names the available ones; an unparsable file fails each cluster without quoting it, read once', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-kubeconfig-'));
    const good = join(dir, 'good.yaml');
    writeFileSync(good, fleetKubeconfig(2, (i) => `https://c${i}.example.test`));
    const files = new KubeconfigFiles();
    expect(() => files.forContext(good, 'ctx-9')).toThrow('kubeconfig context "ctx-9" not found (contexts: ctx-0, ctx-1)');

    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'users:\n- name: u\n  user:\n    token: sekret-token-value\n  : : [unclosed\n');
    let reads = 0;
    const counting = new KubeconfigFiles((p) => {
      reads++;
      return readFileSync(p, 'utf8');
    });
    for (const ctx of ['a', 'b']) {
      let err: unknown;
      try {
        counting.forContext(bad, ctx);
      } catch (e) {
        err = e;
      }
      expect((err as Error).message).toMatch(new RegExp(`^cannot load kubeconfig ${bad}: `));
      expect((err as Error).message).not.toContain('sekret-token-value');
    }
    expect(reads).toBe(1);
  });
});
