/**
 * A fleet kubeconfig loads once (src/cluster/kube.ts KubeconfigFiles): with one file of 300 contexts, the file is read
 * (counted through the loader's read seam) and parsed once, and each cluster's `KubeConfig` holds its own context,
 * cluster and user only — usable against the loopback fake API server. The parse is reused while the file is
 * unchanged and read again when it is edited (size, mtime) or replaced (inode); clusters naming only a context of the
 * default kubeconfig (`$KUBECONFIG`, merged files, `~/.kube/config`) share it too. A missing context names the file
 * and the ones available; relative file paths resolve against the kubeconfig's folder; a file that does not parse
 * fails every cluster naming it without quoting its content.
 */
import { mkdirSync, mkdtempSync, readFileSync, renameSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { KubeconfigFiles, kubeConfigFor } from '../../src/cluster/kube.js';
import { startFakeKube, type FakeKube } from '../../src/sandbox/fakes/kubernetes.js';

let kube: FakeKube | undefined;
afterEach(async () => {
  vi.unstubAllEnvs();
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
    // A missing context: the message names it and the file, and lists the first ten contexts of 300.
    expect(() => files.forContext(path, 'ctx-300')).toThrow(
      `kubeconfig context "ctx-300" not found in ${path} (contexts: ${Array.from({ length: 10 }, (_, i) => `ctx-${i}`).join(', ')} and 290 more)`,
    );
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
    expect(() => files.forContext(good, 'ctx-9')).toThrow(`kubeconfig context "ctx-9" not found in ${good} (contexts: ctx-0, ctx-1)`);

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

  it('reads the file again once it is edited (size, mtime) or replaced (inode); not while it is unchanged', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-kubeconfig-'));
    const path = join(dir, 'fleet.yaml');
    writeFileSync(path, fleetKubeconfig(3, (i) => `https://c${i}.example.test`));
    let reads = 0;
    const files = new KubeconfigFiles((p) => {
      reads++;
      return readFileSync(p, 'utf8');
    });
    const server = (ctx: string): string | undefined => kubeConfigFor({ kubeconfig: path, context: ctx }, files).getCurrentCluster()?.server;
    expect([server('ctx-1'), server('ctx-2'), server('ctx-1')]).toEqual(['https://c1.example.test', 'https://c2.example.test', 'https://c1.example.test']);
    expect(reads).toBe(1);

    // Edited: a context more (another size), a cluster moved.
    writeFileSync(path, fleetKubeconfig(4, (i) => `https://moved-${i}.example.test`));
    expect([server('ctx-1'), server('ctx-3')]).toEqual(['https://moved-1.example.test', 'https://moved-3.example.test']);
    expect(reads).toBe(2);

    // Edited in place to the same size: the modification time tells (set apart explicitly, not left to the clock).
    const before = statSync(path);
    writeFileSync(path, fleetKubeconfig(4, (i) => `https://MOVED-${i}.example.test`));
    utimesSync(path, before.atime, new Date(before.mtimeMs + 5_000));
    expect(server('ctx-2')).toBe('https://MOVED-2.example.test');
    expect(reads).toBe(3);

    // Replaced by rename (as a rotation writes a new file and moves it in) with the same size and times: a new inode.
    const replacement = join(dir, 'fleet.yaml.new');
    writeFileSync(replacement, fleetKubeconfig(4, (i) => `https://newer-${i}.example.test`));
    const now = statSync(path);
    utimesSync(replacement, now.atime, now.mtime);
    renameSync(replacement, path);
    expect(server('ctx-0')).toBe('https://newer-0.example.test');
    expect(reads).toBe(4);

    // Dropped parses are read again on the next use.
    files.clear();
    expect(server('ctx-0')).toBe('https://newer-0.example.test');
    expect(reads).toBe(5);
  });

  it('clusters naming only a context of the default kubeconfig share one parse: $KUBECONFIG (merged files), ~/.kube/config', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tw-kubeconfig-'));
    const fleet = join(dir, 'fleet.yaml');
    writeFileSync(fleet, fleetKubeconfig(50, (i) => `https://c${i}.example.test`));
    const reads: string[] = [];
    const files = new KubeconfigFiles((p) => {
      reads.push(p);
      return readFileSync(p, 'utf8');
    });

    vi.stubEnv('KUBECONFIG', fleet);
    for (let i = 0; i < 50; i++) {
      const kc = kubeConfigFor({ context: `ctx-${i}` }, files);
      expect(kc.getCurrentCluster()?.server).toBe(`https://c${i}.example.test`);
      expect(kc.getCurrentCluster()?.caFile).toBe(join(dir, 'certs', `ca-${i}.crt`));
    }
    // The same file named by path shares the parse too.
    expect(kubeConfigFor({ kubeconfig: fleet, context: 'ctx-7' }, files).getCurrentUser()?.token).toBe('token-7');
    expect(reads).toEqual([fleet]);
    expect(() => kubeConfigFor({ context: 'nope' }, files)).toThrow(`kubeconfig context "nope" not found in ${fleet} (contexts: `);

    // Two files, merged as client-node's loadFromDefault merges them: the later file's current-context wins, and its
    // relative paths resolve against its own folder.
    mkdirSync(join(dir, 'other'));
    const other = join(dir, 'other', 'extra.yaml');
    writeFileSync(
      other,
      'apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster:\n    server: https://x.example.test\n    certificate-authority: x.crt\nusers:\n- name: ux\n  user:\n    token: tx\ncontexts:\n- name: ctx-x\n  context:\n    cluster: x\n    user: ux\ncurrent-context: ctx-x\n',
    );
    vi.stubEnv('KUBECONFIG', `${fleet}${delimiter}${delimiter}${other}`);
    reads.length = 0;
    expect(kubeConfigFor({}, files).getCurrentCluster()?.caFile).toBe(join(dir, 'other', 'x.crt'));
    expect(kubeConfigFor({ context: 'ctx-3' }, files).getCurrentCluster()?.server).toBe('https://c3.example.test');
    expect(reads).toEqual([fleet, other]);

    // No $KUBECONFIG: ~/.kube/config.
    vi.stubEnv('KUBECONFIG', '');
    const home = join(dir, 'home');
    mkdirSync(join(home, '.kube'), { recursive: true });
    writeFileSync(join(home, '.kube', 'config'), fleetKubeconfig(2, (i) => `https://home-${i}.example.test`));
    vi.stubEnv('HOME', home);
    reads.length = 0;
    expect([0, 1, 1].map((i) => kubeConfigFor({ context: `ctx-${i}` }, files).getCurrentCluster()?.server)).toEqual([
      'https://home-0.example.test',
      'https://home-1.example.test',
      'https://home-1.example.test',
    ]);
    expect(reads).toEqual([join(home, '.kube', 'config')]);
  });
});
