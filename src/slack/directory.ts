/**
 * Slack user-group membership for the approval policy: which of the policy's user groups (`S…`) a user belongs to,
 * and the users an approver list names once its groups are expanded. Members come from `usergroups.users.list`
 * (scope `usergroups:read`, api.slack.com/methods/usergroups.users.list), cached for `ttlMs` (default 1 min: someone
 * removed from a group stops counting as an approver within a minute, also for votes already cast, which are
 * re-checked when the quorum is reached). When Slack cannot be asked, the last known members are used for at most
 * `maxStaleMs` after they were read (default 1 min); after that, or with none known, the group
 * counts as empty (fail closed: someone removed from the group must not keep approving while the call fails).
 */
import type { Logger } from '../observability/logger.js';
import { resolveMembers, SLACK_GROUP_ID } from '../approvals/index.js';
import type { SlackApi } from './api.js';

/** Options of {@link Directory}. */
export interface DirectoryOptions {
  logger: Logger;
  /** Cache lifetime of a group's members, ms (default 60,000). */
  ttlMs?: number;
  /** How long after their last successful read members are still used when Slack cannot be asked, ms (default 60,000). */
  maxStaleMs?: number;
  /** Wall clock, epoch ms. */
  now?: () => number;
}

/** See the module docstring. */
export class Directory {
  private readonly cache = new Map<string, { members: string[]; at: number }>();
  private readonly inflight = new Map<string, Promise<string[]>>();
  private readonly ttl: number;
  private readonly maxStale: number;
  private readonly now: () => number;

  constructor(
    private readonly api: Pick<SlackApi, 'usergroupMembers'>,
    private readonly opts: DirectoryOptions,
  ) {
    this.ttl = opts.ttlMs ?? 60_000;
    this.maxStale = Math.max(this.ttl, opts.maxStaleMs ?? 60_000);
    this.now = opts.now ?? Date.now;
  }

  /** Member user ids of a user group (cached). Never throws. */
  async members(groupId: string): Promise<string[]> {
    const hit = this.cache.get(groupId);
    if (hit && this.now() - hit.at < this.ttl) return hit.members;
    let p = this.inflight.get(groupId);
    if (!p) {
      p = this.api
        .usergroupMembers(groupId)
        .then((members) => {
          this.cache.set(groupId, { members, at: this.now() });
          return members;
        })
        .catch((err: unknown) => {
          const last = this.cache.get(groupId);
          const usable = last !== undefined && this.now() - last.at < this.maxStale;
          this.opts.logger.warn(
            { err, group: groupId, lastReadAgeMs: last ? this.now() - last.at : undefined },
            `cannot read the members of Slack user group ${groupId} (usergroups:read scope?); ${usable ? 'using the last known members' : last ? 'the last known members are too old: nobody in this group may approve until Slack answers' : 'nobody in this group may approve until Slack answers'}`,
          );
          return usable ? last.members : [];
        })
        .finally(() => this.inflight.delete(groupId));
      this.inflight.set(groupId, p);
    }
    return p;
  }

  /** The user groups among `ids` (user and group ids of a policy list) that `user` belongs to. */
  async groupsOf(user: string, ids: readonly string[]): Promise<string[]> {
    const groups = [...new Set(ids.filter((id) => SLACK_GROUP_ID.test(id)))];
    const out: string[] = [];
    for (const g of groups) if ((await this.members(g)).includes(user)) out.push(g);
    return out;
  }

  /** The distinct users `ids` names, groups expanded (see `resolveMembers`). */
  async expand(ids: readonly string[]): Promise<string[]> {
    const groups = [...new Set(ids.filter((id) => SLACK_GROUP_ID.test(id)))];
    const members = new Map<string, string[]>();
    for (const g of groups) members.set(g, await this.members(g));
    return resolveMembers(ids, (g) => members.get(g) ?? []);
  }
}
