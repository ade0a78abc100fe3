/**
 * Test helper: renders the kustomizations under `manifests/` without a kustomize binary, for the subset of
 * kustomize (v5, `kustomize.config.k8s.io/v1beta1`) that the manifests use — `resources` (files and directories),
 * `components` (directories with `kind: Component`, `kustomize.config.k8s.io/v1alpha1`, applied after the
 * resources), `patches` (strategic-merge patch files, `$patch: delete`), `configMapGenerator` (`files`, `options.labels`,
 * with `generatorOptions.disableNameSuffixHash: true`) and `images` (`newName`, `newTag`). Any other field is an
 * error, so this renderer cannot silently diverge from kustomize; where `kubectl` is installed a test also
 * compares it with `kubectl kustomize`.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { applyMergePatch } from '../../src/sandbox/fakes/kubernetes/patches.js';

export const MANIFESTS = resolve(import.meta.dirname, '../../manifests');

/** A Kubernetes object as plain data. */
export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [k: string]: unknown;
};

const SUPPORTED = new Set(['apiVersion', 'kind', 'resources', 'components', 'patches', 'configMapGenerator', 'generatorOptions', 'images']);

/** Parses every YAML document of a file (empty documents dropped). @throws on YAML errors. */
export function readDocs(file: string): unknown[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  const out: unknown[] = [];
  for (const d of docs) {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
    const v: unknown = d.toJS();
    if (v !== null && v !== undefined) out.push(v);
  }
  return out;
}

function asObject(v: unknown, where: string): K8sObject {
  const o = v as Partial<K8sObject>;
  if (typeof o !== 'object' || o === null || typeof o.apiVersion !== 'string' || typeof o.kind !== 'string' || typeof o.metadata?.name !== 'string') {
    throw new Error(`${where}: not a Kubernetes object (apiVersion, kind, metadata.name)`);
  }
  return o as K8sObject;
}

/** `apps/v1 Deployment tokenwatch/tokenwatch`: identity of an object. */
export function idOf(o: { apiVersion?: string; kind?: string; metadata?: { name?: string; namespace?: string } }): string {
  return `${o.apiVersion} ${o.kind} ${o.metadata?.namespace ?? ''}/${o.metadata?.name}`;
}

/** The kustomization file of a directory. */
export function kustomizationOf(dir: string): Record<string, unknown> {
  const file = join(dir, 'kustomization.yaml');
  const [k] = readDocs(file);
  if (typeof k !== 'object' || k === null) throw new Error(`${file}: empty`);
  for (const key of Object.keys(k)) if (!SUPPORTED.has(key)) throw new Error(`${file}: field ${key} is not supported by the test renderer`);
  const kind = `${String((k as Record<string, unknown>)['apiVersion'])} ${String((k as Record<string, unknown>)['kind'])}`;
  if (kind !== 'kustomize.config.k8s.io/v1beta1 Kustomization' && kind !== 'kustomize.config.k8s.io/v1alpha1 Component') throw new Error(`${file}: unexpected ${kind}`);
  return k as Record<string, unknown>;
}

/** Files a kustomization uses as patches or generator inputs (relative to the manifests root). */
export function nonResourceFiles(dir: string): string[] {
  const k = kustomizationOf(dir);
  const out: string[] = [];
  for (const p of (k['patches'] as { path?: string }[] | undefined) ?? []) if (p.path) out.push(join(dir, p.path));
  for (const g of (k['configMapGenerator'] as { files?: string[] }[] | undefined) ?? []) for (const f of g.files ?? []) out.push(join(dir, f));
  return out;
}

/**
 * Renders a kustomization directory into its objects, in resource order. A Component directory renders on its own
 * into its resources (kustomize refuses that; the tests use it to look at a component's objects).
 * @param extraComponents component directories applied as if listed under `components:` of `dir`.
 */
export function render(dir: string, extraComponents: string[] = []): K8sObject[] {
  const k = kustomizationOf(dir);
  let objs: K8sObject[] = [];
  for (const r of (k['resources'] as string[] | undefined) ?? []) {
    const p = join(dir, r);
    if (!existsSync(p)) throw new Error(`${dir}: resource ${r} does not exist`);
    if (statSync(p).isDirectory()) objs.push(...render(p));
    else objs.push(...readDocs(p).map((d, i) => asObject(d, `${p}#${i}`)));
  }
  for (const c of [...((k['components'] as string[] | undefined) ?? []).map((c) => join(dir, c)), ...extraComponents]) {
    const ck = kustomizationOf(c);
    if (ck['kind'] !== 'Component') throw new Error(`${c}: not a kustomize Component`);
    if (ck['patches'] || ck['configMapGenerator'] || ck['images'] || ck['components']) throw new Error(`${c}: the test renderer supports components with resources only`);
    objs.push(...render(c));
  }
  const gens = (k['configMapGenerator'] as { name: string; namespace?: string; files?: string[]; options?: { labels?: Record<string, string> } }[] | undefined) ?? [];
  if (gens.length > 0 && (k['generatorOptions'] as { disableNameSuffixHash?: boolean } | undefined)?.disableNameSuffixHash !== true) {
    throw new Error(`${dir}: the test renderer needs generatorOptions.disableNameSuffixHash: true`);
  }
  for (const g of gens) {
    const data: Record<string, string> = {};
    for (const f of g.files ?? []) data[basename(f)] = readFileSync(join(dir, f), 'utf8');
    const metadata: K8sObject['metadata'] = { name: g.name };
    if (g.namespace) metadata.namespace = g.namespace;
    if (g.options?.labels) metadata.labels = { ...g.options.labels };
    objs.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata, data });
  }
  for (const p of (k['patches'] as { path?: string }[] | undefined) ?? []) {
    if (!p.path) throw new Error(`${dir}: only file patches are supported by the test renderer`);
    for (const patch of readDocs(join(dir, p.path)).map((d) => asObject(d, p.path!))) {
      const idx = objs.findIndex((o) => idOf(o) === idOf(patch));
      if (idx < 0) throw new Error(`${dir}: patch ${p.path} matches no resource (${idOf(patch)})`);
      if ((patch as Record<string, unknown>)['$patch'] === 'delete') objs = objs.filter((_, i) => i !== idx);
      else objs[idx] = applyMergePatch(objs[idx], patch, true) as K8sObject;
    }
  }
  for (const img of (k['images'] as { name: string; newName?: string; newTag?: string }[] | undefined) ?? []) {
    for (const o of objs) {
      const spec = (o['spec'] as { template?: { spec?: { containers?: { image?: string }[]; initContainers?: { image?: string }[] } } } | undefined)?.template?.spec;
      for (const c of [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])]) {
        const image = c.image ?? '';
        const [name, tag] = image.includes(':') ? [image.slice(0, image.lastIndexOf(':')), image.slice(image.lastIndexOf(':') + 1)] : [image, undefined];
        if (name !== img.name) continue;
        const newTag = img.newTag ?? tag;
        c.image = `${img.newName ?? name}${newTag ? `:${newTag}` : ''}`;
      }
    }
  }
  return objs;
}

/** Every `*.yaml` / `*.yml` file below a directory (sorted). */
export function yamlFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (/\.ya?ml$/.test(name)) out.push(p);
    }
  };
  walk(dir);
  return out;
}
