/**
 * Field and label selectors of the fake Kubernetes API server (`src/sandbox/fakes/kubernetes.ts`), with the per-resource
 * supported fields and the grammar of the real API server.
 */
import { fieldValue, isObj, type Obj } from './json.js';
import { type KubeObject, type ResourceDef, StatusError } from './types.js';

export interface FieldTerm {
  field: string;
  op: '=' | '!=';
  value: string;
}

/**
 * Parse a field selector (`a=b,c!=d`, `==` allowed). Supported fields: `metadata.name`, `metadata.namespace` and
 * `def.fieldSelectors`.
 * @throws StatusError 400 on a malformed term or an unsupported field (`field label not supported: <field>`).
 */
export function parseFieldSelector(selector: string, def: ResourceDef): FieldTerm[] {
  const terms: FieldTerm[] = [];
  for (const raw of selector.split(',')) {
    const term = raw.trim();
    if (!term) continue;
    const m = /^([^!=]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m?.[1]) throw new StatusError(400, 'BadRequest', `invalid field selector: '${term}'; can't understand '${term}'`);
    const field = m[1].trim();
    const supported = field === 'metadata.name' || field === 'metadata.namespace' || (def.fieldSelectors ?? []).includes(field);
    if (!supported) throw new StatusError(400, 'BadRequest', `field label not supported: ${field}`);
    terms.push({ field, op: m[2] === '!=' ? '!=' : '=', value: (m[3] ?? '').trim() });
  }
  return terms;
}

export function matchesFields(obj: KubeObject, terms: FieldTerm[]): boolean {
  return terms.every((t) => (fieldValue(obj, t.field) === t.value) === (t.op === '='));
}

export type LabelTerm =
  | { op: 'eq' | 'ne'; key: string; value: string }
  | { op: 'in' | 'notin'; key: string; values: string[] }
  | { op: 'exists' | 'notexists'; key: string };

/**
 * Parse a label selector: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, comma-separated.
 * @throws StatusError 400 on a malformed term.
 */
export function parseLabelSelector(selector: string): LabelTerm[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  const terms: LabelTerm[] = [];
  for (const raw of parts) {
    const term = raw.trim();
    if (!term) continue;
    let m: RegExpExecArray | null;
    if ((m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term)) && m[1] && m[2]) {
      terms.push({ op: m[2] === 'in' ? 'in' : 'notin', key: m[1], values: (m[3] ?? '').split(',').map((v) => v.trim()).filter(Boolean) });
    } else if ((m = /^([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)$/.exec(term)) && m[1]) {
      terms.push({ op: m[2] === '!=' ? 'ne' : 'eq', key: m[1], value: m[3] ?? '' });
    } else if ((m = /^!\s*([\w./-]+)$/.exec(term)) && m[1]) {
      terms.push({ op: 'notexists', key: m[1] });
    } else if ((m = /^([\w./-]+)$/.exec(term)) && m[1]) {
      terms.push({ op: 'exists', key: m[1] });
    } else {
      throw new StatusError(400, 'BadRequest', `unable to parse requirement: invalid label selector '${term}'`);
    }
  }
  return terms;
}

export function matchesLabels(obj: KubeObject, terms: LabelTerm[]): boolean {
  const raw = isObj(obj.metadata) ? obj.metadata['labels'] : undefined;
  const labels: Obj = isObj(raw) ? raw : {};
  // biome-ignore lint/suspicious/useIterableCallbackReturn: the switch below is exhaustive over the operators
  return terms.every((t) => {
    const has = typeof labels[t.key] === 'string';
    const v = has ? String(labels[t.key]) : undefined;
    switch (t.op) {
      case 'eq':
        return v === t.value;
      case 'ne':
        return v !== t.value;
      case 'in':
        return v !== undefined && t.values.includes(v);
      case 'notin':
        return v === undefined || !t.values.includes(v);
      case 'exists':
        return has;
      case 'notexists':
        return !has;
    }
  });
}
