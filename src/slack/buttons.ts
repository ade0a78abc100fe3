/**
 * Opaque button ids for finding buttons, and their resolution back to (finding, action, target).
 *
 * A button's `value` carries only an opaque id; the target is never read from the payload (docs/design/architecture.md "Slack and approvals"). The
 * id of a finding button is a keyed hash: base64url(HMAC-SHA256(key, findingId ␟ action ␟ target))[0..22] (132 bits),
 * with the key derived from the bot token. Resolving an id finds the (finding, action) it was computed for and checks
 * that the stored finding still offers that action, so the target always comes from the store's copy of the finding
 * (its workloads, namespace and ServiceAccount). An id that matches nothing (tampered, or the finding or workload is
 * gone) resolves to undefined. Ids are stable across restarts and replicas that share the bot token.
 *
 * Approve/Reject buttons carry the approval id (random, 128 bits; `newApprovalId` in the store), resolved with
 * `Store.approvals.get`.
 */
import { createHash, createHmac } from 'node:crypto';
import type { ActionKind, ActionTarget, TargetKind } from '../approvals/index.js';
import { isRestartableKind } from '../core/actions.js';
import type { WorkloadRef } from '../cluster/types.js';
import type { Finding } from '../findings/types.js';
import type { Store, StoredFinding } from '../store/index.js';
import { OPAQUE_ID_PATTERN, type FindingAction } from './blocks/index.js';

/** A resolved finding button. */
export interface ResolvedButton {
  /** The opaque id that was resolved. */
  id: string;
  finding: StoredFinding;
  action: FindingAction;
  /** The action kind for the approval machinery (`details` has none). */
  kind: ActionKind | 'details';
  /** The exact object the action changes (for snooze and details: the ServiceAccount, for context only). */
  target: ActionTarget;
}

/** Whether a workload can be rollout-restarted. */
export function isRestartable(w: WorkloadRef): w is WorkloadRef & { kind: TargetKind } {
  return isRestartableKind(w.kind);
}

/** Every button action a finding can offer (before policy): restarts of its workloads, recreate, snooze, details. */
export function candidateActions(f: Finding): FindingAction[] {
  const out: FindingAction[] = f.workloads.filter(isRestartable).map((workload) => ({ action: 'restart', workload }));
  if (f.kind !== 'unauthorized') out.push({ action: 'recreate-serviceaccount' });
  out.push({ action: 'snooze', days: 1 }, { action: 'snooze', days: 7 }, { action: 'details' });
  return out;
}

/** The target of an action on a finding. */
export function targetOf(f: Finding, a: FindingAction): ActionTarget {
  if (a.action === 'restart') {
    return { cluster: f.cluster, kind: a.workload.kind as TargetKind, namespace: a.workload.namespace, name: a.workload.name, findingId: f.id };
  }
  return { cluster: f.cluster, kind: 'ServiceAccount', namespace: f.namespace, name: f.serviceAccount, findingId: f.id };
}

/** Canonical text of an action (what the id hashes). */
export function actionKey(a: FindingAction): string {
  switch (a.action) {
    case 'restart':
      return `restart\u001f${a.workload.kind}\u001f${a.workload.namespace}\u001f${a.workload.name}`;
    case 'snooze':
      return `snooze\u001f${a.days}`;
    default:
      return a.action;
  }
}

/** Opaque ids of finding buttons; see the module docstring. */
export class ButtonIds {
  private readonly key: Buffer;
  /** id → (finding, action), filled whenever an id is computed; primed from the store on the first unknown id. */
  private readonly index = new Map<string, { findingId: string; action: FindingAction }>();
  private primed = false;
  /** The scan of the stored findings under way: concurrent resolves of unknown ids wait for the same one. */
  private priming: Promise<void> | undefined;

  /**
   * @param secret key material (the bot token); only its SHA-256 with a fixed label is kept.
   * @param store where findings are read back from.
   */
  constructor(
    secret: string,
    private readonly store: Store,
  ) {
    this.key = createHash('sha256').update('tokenwatch button ids v1\u0000').update(secret).digest();
  }

  /** The opaque id of `action` on finding `findingId` (22 chars of `[A-Za-z0-9_-]`). */
  idFor(findingId: string, action: FindingAction): string {
    const id = this.compute(findingId, action);
    if (this.index.size >= MAX_INDEX) {
      this.index.clear();
      this.primed = false;
    }
    this.index.set(id, { findingId, action });
    return id;
  }

  private compute(findingId: string, action: FindingAction): string {
    return createHmac('sha256', this.key).update(`${findingId}\u001f${actionKey(action)}`).digest('base64url').slice(0, 22);
  }

  /**
   * The finding, action and target behind an id, read from the store; undefined for an id that is not opaque,
   * unknown, or whose finding or workload no longer exists. Every id rendered since the start is indexed; ids
   * rendered by an earlier process are found by one scan of the stored findings (on the first unknown id), so an
   * unknown or tampered id costs a map lookup, not a scan.
   */
  async resolve(id: string): Promise<ResolvedButton | undefined> {
    if (!OPAQUE_ID_PATTERN.test(id)) return undefined;
    let entry = this.index.get(id);
    if (!entry && !this.primed) {
      // A click that comes while the scan runs (the store answers asynchronously) waits for it, not resolves half-primed.
      this.priming ??= this.prime().finally(() => (this.priming = undefined));
      await this.priming;
      entry = this.index.get(id);
    }
    if (!entry) return undefined;
    const stored = await this.store.findings.get(entry.findingId);
    if (!stored) return undefined;
    const key = actionKey(entry.action);
    const action = candidateActions(stored.finding).find((a) => actionKey(a) === key);
    if (!action || this.compute(stored.id, action) !== id) return undefined;
    return { id, finding: stored, action, kind: action.action, target: targetOf(stored.finding, action) };
  }

  /** Indexes the ids of every action of every stored finding. */
  private async prime(): Promise<void> {
    for (const stored of await this.store.findings.list()) {
      for (const action of candidateActions(stored.finding)) this.index.set(this.compute(stored.id, action), { findingId: stored.id, action });
    }
    this.primed = true;
  }
}

/** Index size at which it is rebuilt from the store (bounds memory with many short-lived findings). */
const MAX_INDEX = 200_000;
