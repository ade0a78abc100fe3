/** Small JSON and metadata helpers of the fake Kubernetes API server (`src/sandbox/fakes/kubernetes.ts`). */
import { type KubeObject, type ResourceDef, StatusError } from './types.js';

export type Obj = Record<string, unknown>;

export function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function meta(obj: KubeObject): Obj {
  if (!isObj(obj.metadata)) obj.metadata = {};
  return obj.metadata as Obj;
}

export function metaStr(obj: KubeObject, key: string): string | undefined {
  const v = isObj(obj.metadata) ? obj.metadata[key] : undefined;
  return typeof v === 'string' ? v : undefined;
}

export function clone<T>(v: T): T {
  return structuredClone(v);
}

export function apiVersionOf(def: ResourceDef): string {
  return def.group ? `${def.group}/${def.version}` : def.version;
}

/** `pods`, `daemonsets.apps`: how error messages name a resource. */
export function qualifiedResource(def: ResourceDef): string {
  return def.group ? `${def.resource}.${def.group}` : def.resource;
}

export function notFoundDetails(def: ResourceDef, name: string): Obj {
  const d: Obj = { name, kind: def.resource };
  if (def.group) d['group'] = def.group;
  return d;
}

/**
 * The 422 of a write that changes `metadata.uid`: apimachinery `ValidateObjectMetaUpdate` (field is immutable),
 * worded as `errors.NewInvalid` words it (`<Kind>.<group> "<name>" is invalid: <field>: <detail>`).
 */
export function immutableUid(def: ResourceDef, name: string, uid: string): StatusError {
  const detail = `Invalid value: "${uid}": field is immutable`;
  const details: Obj = { name, kind: def.kind, causes: [{ reason: 'FieldValueInvalid', message: detail, field: 'metadata.uid' }] };
  if (def.group) details['group'] = def.group;
  return new StatusError(422, 'Invalid', `${def.group ? `${def.kind}.${def.group}` : def.kind} "${name}" is invalid: metadata.uid: ${detail}`, details);
}

export function nowRfc3339(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function specJson(obj: KubeObject | undefined): string {
  return JSON.stringify(obj?.['spec'] ?? null);
}

/** Value at a dotted field path as a field selector compares it (missing → `''`, booleans/numbers as text). */
export function fieldValue(obj: KubeObject, path: string): string {
  let cur: unknown = obj;
  for (const key of path.split('.')) {
    if (!isObj(cur)) return '';
    cur = cur[key];
  }
  if (typeof cur === 'string') return cur;
  if (typeof cur === 'number' || typeof cur === 'boolean') return String(cur);
  return '';
}
