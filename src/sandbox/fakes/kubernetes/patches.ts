/**
 * Patches of the fake Kubernetes API server (`src/sandbox/fakes/kubernetes.ts`): JSON merge and strategic merge
 * (RFC 7386, list merge keys), JSON Patch (RFC 6902).
 */
import { ErrorCode, TokenwatchError } from '../../../errors.js';
import { clone, isObj, type Obj } from './json.js';

/** Merge keys of strategic-merge lists that are not keyed by `name` (k8s.io/api core/v1 `patchMergeKey` tags). */
const MERGE_KEYS: Record<string, string> = { volumeMounts: 'mountPath', ports: 'containerPort', volumeDevices: 'devicePath', hostAliases: 'ip' };

function mergeList(target: unknown[], patch: unknown[], key: string): unknown[] {
  const out = target.map((x) => clone(x));
  for (const item of patch) {
    if (!isObj(item)) continue;
    const idx = out.findIndex((x) => isObj(x) && x[key] === item[key]);
    if (item['$patch'] === 'delete') {
      if (idx >= 0) out.splice(idx, 1);
      continue;
    }
    if (idx >= 0) out[idx] = applyMergePatch(out[idx], item, true);
    else out.push(applyMergePatch(undefined, item, true));
  }
  return out;
}

/**
 * Apply a JSON merge patch (RFC 7386: objects merge recursively, `null` deletes a key, anything else replaces).
 * With `strategic`, an approximation of Kubernetes strategic merge patch: additionally, lists of objects that all carry
 * their merge key (`name`, or `mountPath`/`containerPort`/… per {@link MERGE_KEYS}) are merged item by item
 * (`$patch: delete` removes an item), and `$`-directives such as `$setElementOrder/…` and `$retainKeys` are ignored.
 */
export function applyMergePatch(target: unknown, patch: unknown, strategic = false): unknown {
  if (!isObj(patch)) return clone(patch);
  const out: Obj = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (strategic && k.startsWith('$')) continue;
    if (v === null) {
      delete out[k];
      continue;
    }
    const cur = out[k];
    if (strategic && Array.isArray(v) && Array.isArray(cur)) {
      const key = MERGE_KEYS[k] ?? 'name';
      if ([...v, ...cur].every((x) => isObj(x) && x[key] !== undefined)) {
        out[k] = mergeList(cur, v, key);
        continue;
      }
    }
    out[k] = applyMergePatch(cur, v, strategic);
  }
  return out;
}

function decodePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `invalid JSON pointer ${JSON.stringify(pointer)}`);
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function pointerGet(doc: unknown, path: string[]): unknown {
  let cur = doc;
  for (const seg of path) {
    if (Array.isArray(cur)) cur = cur[Number(seg)];
    else if (isObj(cur)) cur = cur[seg];
    else return undefined;
  }
  return cur;
}

function pointerParent(doc: unknown, path: string[], op: string): { parent: Obj | unknown[]; key: string } {
  const parent = pointerGet(doc, path.slice(0, -1));
  const key = path[path.length - 1];
  if (key === undefined || !(isObj(parent) || Array.isArray(parent))) {
    throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `${op} operation does not apply: doc is missing path: /${path.join('/')}`);
  }
  return { parent, key };
}

/**
 * Apply an RFC 6902 JSON patch (`add`, `remove`, `replace`, `move`, `copy`, `test`) to a copy of `doc`.
 * @throws Error naming the failing op (the HTTP layer answers 422, as kube-apiserver does).
 */
export function applyJsonPatch(doc: unknown, ops: unknown[]): unknown {
  const root: Obj = { doc: clone(doc) };
  const full = (p: unknown): string[] => ['doc', ...decodePointer(String(p))];
  for (const raw of ops) {
    if (!isObj(raw)) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, 'JSON patch operation is not an object');
    const op = String(raw['op']);
    const path = full(raw['path']);
    const add = (target: string[], value: unknown): void => {
      const { parent, key } = pointerParent(root, target, op);
      if (Array.isArray(parent)) {
        const idx = key === '-' ? parent.length : Number(key);
        if (!Number.isInteger(idx) || idx < 0 || idx > parent.length) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `${op} operation: index ${key} out of bounds`);
        parent.splice(idx, 0, clone(value));
      } else parent[key] = clone(value);
    };
    const remove = (target: string[]): unknown => {
      const { parent, key } = pointerParent(root, target, op);
      if (Array.isArray(parent)) {
        const idx = Number(key);
        if (!Number.isInteger(idx) || idx < 0 || idx >= parent.length) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `${op} operation: index ${key} out of bounds`);
        return parent.splice(idx, 1)[0];
      }
      if (!(key in parent)) throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `${op} operation does not apply: doc is missing key: /${target.slice(1).join('/')}`);
      const v = parent[key];
      delete parent[key];
      return v;
    };
    switch (op) {
      case 'add':
        add(path, raw['value']);
        break;
      case 'remove':
        remove(path);
        break;
      case 'replace':
        remove(path);
        add(path, raw['value']);
        break;
      case 'move':
        add(path, remove(full(raw['from'])));
        break;
      case 'copy':
        add(path, pointerGet(root, full(raw['from'])));
        break;
      case 'test':
        if (JSON.stringify(pointerGet(root, path)) !== JSON.stringify(raw['value'])) {
          throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `testing value /${path.slice(1).join('/')} failed: test failed`);
        }
        break;
      default:
        throw new TokenwatchError(ErrorCode.FakeRequestInvalid, `Unexpected kind: ${op}`);
    }
  }
  return root['doc'];
}
