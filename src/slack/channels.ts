/**
 * Which Slack channel belongs to which cluster. Each cluster's `slack.channel` is its alert channel and the only
 * channel from which `/tokens … <cluster>` and its buttons work: per-team clusters in one workspace, where a channel
 * reaches only its own cluster (kubeshop/botkube#250 and #235, docs/design/prior-art.md: refuse elsewhere, and say why).
 *
 * The config names a channel by id (`C…`, `G…`) or by `#name`. Slack payloads carry the channel id and name (slash
 * commands from private channels may say `privategroup` instead of the name), so for a `#name` the id is learned
 * from the first successful `chat.postMessage` answer.
 *
 * Routing rules (`slack.routes`, src/slack/routing.ts) send some of a cluster's alerts to other channels (a team's).
 * The scoping rule is extended, not loosened: `/tokens … <cluster>` and the buttons of a cluster's alerts work in the
 * cluster's channel and in every channel a rule can route that cluster's alerts to ({@link ChannelMap.channelsOf}),
 * and nowhere else.
 */
import type { ClusterConfig, Config } from '../config/types.js';
import type { SlackRoute } from '../config/schema.js';
import { routeOf, ruleMayMatchCluster, type Route, type RouteSubject } from './routing.js';

/** A channel as a Slack payload names it. */
export interface ChannelRef {
  id: string;
  name?: string;
}

/** See the module docstring. */
export class ChannelMap {
  private readonly learned = new Map<string, string>();

  private readonly rules: readonly SlackRoute[];

  constructor(private readonly config: Pick<Config, 'clusters'> & { slack?: { routes?: SlackRoute[] } | undefined }) {
    this.rules = config.slack?.routes ?? [];
  }

  /** The routing rules (`slack.routes`), in order; empty without any. */
  get routes(): readonly SlackRoute[] {
    return this.rules;
  }

  /**
   * Every channel (as configured) where alerts of `cluster` may be: its alert channel first, then the channel of each
   * rule whose `match.clusters` accepts it, deduplicated. Empty when the cluster has no slack section.
   */
  channelsOf(cluster: string): string[] {
    const own = this.channelOf(cluster);
    if (own === undefined) return [];
    return [...new Set([own, ...this.rules.filter((r) => ruleMayMatchCluster(r, cluster)).map((r) => r.channel)])];
  }

  /**
   * Where a new alert of `s.cluster` goes (the first matching rule, else the cluster's channel), or undefined when
   * the cluster has no slack section.
   */
  routeOf(s: RouteSubject): Route | undefined {
    const own = this.channelOf(s.cluster);
    return own === undefined ? undefined : routeOf(this.rules, own, s);
  }

  /** Records that the configured channel `configured` (e.g. `#ops`) has id `id`. */
  learn(configured: string, id: string): void {
    if (configured !== id) this.learned.set(configured, id);
  }

  /** The configured alert channel of a cluster (id or `#name`), or undefined without a slack section. */
  channelOf(cluster: string): string | undefined {
    return this.config.clusters.find((c) => c.name === cluster)?.slack?.channel;
  }

  /** The id of a cluster's channel when known (configured id, or learned for a `#name`). */
  channelIdOf(cluster: string): string | undefined {
    const ch = this.channelOf(cluster);
    if (ch === undefined) return undefined;
    return ch.startsWith('#') ? this.learned.get(ch) : ch;
  }

  /** The id of a configured channel (`C…` as is; a `#name` once learned, else the name itself). */
  idOf(configured: string): string {
    return configured.startsWith('#') ? (this.learned.get(configured) ?? configured) : configured;
  }

  /** Whether a configured channel (`C…` or `#name`) is the channel `ref`. */
  matches(configured: string, ref: ChannelRef): boolean {
    if (configured === ref.id) return true;
    if (configured.startsWith('#')) return this.learned.get(configured) === ref.id || configured.slice(1) === ref.name;
    return false;
  }

  /** Whether `ref` is the alert channel of `cluster` or a channel its rules route to ({@link channelsOf}). */
  allows(cluster: string, ref: ChannelRef): boolean {
    return this.channelsOf(cluster).some((ch) => this.matches(ch, ref));
  }

  /** Clusters whose alert channel is `ref`, or whose rules route to it. */
  clustersIn(ref: ChannelRef): ClusterConfig[] {
    return this.config.clusters.filter((c) => this.channelsOf(c.name).some((ch) => this.matches(ch, ref)));
  }

  /** Names of the clusters alerting in a channel given as configured or by id (for log lines), routed alerts included. */
  clustersPostingTo(channel: string): string[] {
    return this.config.clusters.filter((c) => this.channelsOf(c.name).some((ch) => ch === channel || this.learned.get(ch) === channel)).map((c) => c.name);
  }

  /** A mention of a cluster's channel: `<#C123>` when the id is known, else `#name`. */
  mention(cluster: string): string {
    const id = this.channelIdOf(cluster);
    if (id !== undefined) return `<#${id}>`;
    return this.channelOf(cluster) ?? '(no channel)';
  }
}
