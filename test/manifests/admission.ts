/**
 * Test helper: evaluates a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) the way the API server does
 * for one request, with `@bufbuild/cel` (CEL core, no Kubernetes CEL libraries registered — so an expression using
 * one fails here with "unbound function" instead of passing unnoticed).
 *
 * Kubernetes semantics reproduced (docs "Validating Admission Policy"): every `matchConditions` expression must be
 * true for the policy to apply; `variables` are evaluated in order and visible as `variables.<name>`; each
 * validation must be true; an evaluation error counts as a failure under `failurePolicy: Fail`. `object` and
 * `oldObject` are plain maps (null for CREATE / DELETE), integers are CEL ints (int64). `matchConstraints` is
 * checked by {@link matchesConstraints}; the policy here matches every resource.
 */
import { isCelError, parse, run, type CelInput, type CelValue } from '@bufbuild/cel';

/** The fields of a ValidatingAdmissionPolicy the evaluator uses. */
export interface AdmissionPolicy {
  spec: {
    failurePolicy?: string;
    matchConstraints: { resourceRules: { apiGroups: string[]; apiVersions: string[]; operations: string[]; resources: string[] }[] };
    paramKind?: { apiVersion: string; kind: string };
    matchConditions?: { name: string; expression: string }[];
    variables?: { name: string; expression: string }[];
    validations: { expression: string; message?: string; messageExpression?: string; reason?: string }[];
  };
}

/** An admission request, as the API server hands it to CEL (`request`, `object`, `oldObject`). */
export interface AdmissionInput {
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  /** `{ group, version, resource }`; group `''` for core. */
  resource: { group: string; version: string; resource: string };
  subResource?: string;
  namespace?: string;
  name?: string;
  username: string;
  /** The user's groups (absent = none, as `userInfo.groups` is omitted when empty). */
  groups?: string[];
  /** The binding's params object (the ConfigMap of `paramRef`); absent = none found (`params` is null). */
  params?: unknown;
  object?: unknown;
  oldObject?: unknown;
}

/** The outcome: `applies` false when a match condition is false; `denied` lists the failed validations' messages. */
export interface AdmissionResult {
  applies: boolean;
  allowed: boolean;
  denied: string[];
}

/** Plain JSON → CEL input: objects become maps, whole numbers int64 (bigint), like Kubernetes' unstructured objects. */
export function toCel(v: unknown): CelInput {
  if (v === null || v === undefined) return null;
  if (Array.isArray(v)) return v.map(toCel);
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (typeof v === 'object') return new Map(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, toCel(x)]));
  return v as CelInput;
}

function requestOf(i: AdmissionInput): Record<string, unknown> {
  const r: Record<string, unknown> = {
    operation: i.operation,
    resource: i.resource,
    kind: {},
    userInfo: { username: i.username, ...(i.groups && i.groups.length > 0 ? { groups: i.groups } : {}) },
    dryRun: false,
  };
  // omitempty fields of AdmissionRequest: absent when empty, as in the unstructured request the API server builds.
  if (i.subResource) r['subResource'] = i.subResource;
  if (i.namespace) r['namespace'] = i.namespace;
  if (i.name) r['name'] = i.name;
  return r;
}

/** Whether the rules of `matchConstraints` cover the request (wildcards "*" = every resource, "*\/*" = every subresource too). */
export function matchesConstraints(policy: AdmissionPolicy, i: AdmissionInput): boolean {
  const res = i.subResource ? `${i.resource.resource}/${i.subResource}` : i.resource.resource;
  return policy.spec.matchConstraints.resourceRules.some(
    (r) =>
      (r.apiGroups.includes('*') || r.apiGroups.includes(i.resource.group)) &&
      (r.apiVersions.includes('*') || r.apiVersions.includes(i.resource.version)) &&
      (r.operations.includes('*') || r.operations.includes(i.operation)) &&
      r.resources.some((p) => p === res || (p === '*' && !i.subResource) || p === '*/*' || (p.endsWith('/*') && i.subResource && p.slice(0, -2) === i.resource.resource)),
  );
}

/** Evaluates the policy for one request. */
export function admit(policy: AdmissionPolicy, input: AdmissionInput): AdmissionResult {
  const base: Record<string, CelInput> = {
    request: toCel(requestOf(input)),
    object: toCel(input.object),
    oldObject: toCel(input.oldObject),
    params: toCel(input.params),
  };
  if (!matchesConstraints(policy, input)) return { applies: false, allowed: true, denied: [] };
  for (const c of policy.spec.matchConditions ?? []) {
    const v = run(c.expression, base);
    if (isCelError(v)) return { applies: true, allowed: false, denied: [`match condition ${c.name}: ${v.message}`] };
    if (v !== true) return { applies: false, allowed: true, denied: [] };
  }
  const variables = new Map<string, CelValue>();
  const errors = new Map<string, string>();
  for (const v of policy.spec.variables ?? []) {
    const out = run(v.expression, { ...base, variables: variables as unknown as CelInput });
    if (isCelError(out)) errors.set(v.name, out.message);
    else variables.set(v.name, out);
  }
  const denied: string[] = [];
  for (const val of policy.spec.validations) {
    const bindings = { ...base, variables: variables as unknown as CelInput };
    const out = run(val.expression, bindings);
    if (out === true) continue;
    if (isCelError(out)) {
      denied.push(`error: ${out.message}${errors.size ? ` (variables in error: ${[...errors].map(([k, m]) => `${k}: ${m}`).join('; ')})` : ''}`);
      continue;
    }
    const msg = val.messageExpression ? run(val.messageExpression, bindings) : val.message;
    denied.push(isCelError(msg) ? `messageExpression error: ${msg.message}` : String(msg ?? val.expression));
  }
  return { applies: true, allowed: denied.length === 0, denied };
}

/**
 * Every expression of the policy (match conditions, variables, validations, message expressions), with a label.
 */
export function expressionsOf(policy: AdmissionPolicy): { at: string; expression: string }[] {
  return [
    ...(policy.spec.matchConditions ?? []).map((c) => ({ at: `matchConditions ${c.name}`, expression: c.expression })),
    ...(policy.spec.variables ?? []).map((v) => ({ at: `variables ${v.name}`, expression: v.expression })),
    ...policy.spec.validations.flatMap((v, i) => [
      { at: `validations[${i}]`, expression: v.expression },
      ...(v.messageExpression ? [{ at: `validations[${i}].messageExpression`, expression: v.messageExpression }] : []),
    ]),
  ];
}

/**
 * The functions and operators an expression calls (`_&&_`, `@in`, `size`, …), from its parsed AST (macros such as
 * `has` and `all` are expanded by the parser into field tests and comprehensions, so they do not appear).
 * @throws on a syntax error.
 */
export function functionsOf(expression: string): string[] {
  const out = new Set<string>();
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) {
      node.forEach(walk);
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    const n = node as { $typeName?: string; function?: string };
    if (n.$typeName === 'cel.expr.Expr.Call' && typeof n.function === 'string') out.add(n.function);
    for (const v of Object.values(node)) walk(v);
  };
  walk(parse(expression).expr); // not sourceInfo, which keeps the macro calls (has, all) as written
  return [...out].sort();
}

/**
 * Operators and functions of the CEL standard definitions (cel-spec `langdef.md`, "Standard Definitions"), which
 * every CEL implementation has; anything else would be a Kubernetes CEL library function.
 */
export const CEL_CORE_FUNCTIONS = new Set([
  '!_', '-_', '_!=_', '_%_', '_&&_', '_*_', '_+_', '_-_', '_/_', '_<=_', '_<_', '_==_', '_>=_', '_>_', '_?_:_', '_[_]', '_||_', '@in',
  '@not_strictly_false', 'bool', 'bytes', 'contains', 'double', 'duration', 'dyn', 'endsWith', 'int', 'matches', 'size', 'startsWith',
  'string', 'timestamp', 'type', 'uint',
]);

/** The ValidatingAdmissionPolicy and its binding among rendered objects. @throws when either is missing. */
export function policyObjects(objs: { kind: string }[]): {
  policy: AdmissionPolicy & { metadata: { name: string } };
  binding: { metadata: { name: string }; spec: { policyName: string; validationActions: string[] } };
} {
  const policy = objs.find((o) => o.kind === 'ValidatingAdmissionPolicy');
  const binding = objs.find((o) => o.kind === 'ValidatingAdmissionPolicyBinding');
  if (!policy || !binding) throw new Error('no ValidatingAdmissionPolicy / binding rendered');
  return { policy: policy as never, binding: binding as never };
}
