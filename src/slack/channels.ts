/**
 * Which Slack channel belongs to which cluster. Each cluster's `slack.channel` is its alert channel and the only
 * channel from which `/tokens … <cluster>` and its buttons work: per-team clusters in one workspace, where a channel
 * reaches only its own cluster (kubeshop/botkube#250 and #235, docs/design/prior-art.md: refuse elsewhere, and say why).
 *
 * The config names a channel by id (`C…`, `G…`) or by `#name`. Slack payloads carry the channel id and name (slash
 * commands from private channels may say `privategroup` instead of the name), so for a `#name` the id is learned
 * from the first successful `chat.postMessage` answer.
 */
import type { ClusterConfig, Config } from '../config/types.js';

/** A channel as a Slack payload names it. */
export interface ChannelRef {
  id: string;
  name?: string;
}

/** See the module docstring. */
export class ChannelMap {
  private readonly learned = new Map<string, string>();

  constructor(private readonly config: Pick<Config, 'clusters'>) {}

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

  /** Whether `ref` is the alert channel of `cluster`. */
  allows(cluster: string, ref: ChannelRef): boolean {
    const ch = this.channelOf(cluster);
    return ch !== undefined && this.matches(ch, ref);
  }

  /** Clusters whose alert channel is `ref`. */
  clustersIn(ref: ChannelRef): ClusterConfig[] {
    return this.config.clusters.filter((c) => c.slack !== undefined && this.matches(c.slack.channel, ref));
  }

  /** Names of the clusters alerting in a channel given as configured or by id (for log lines). */
  clustersPostingTo(channel: string): string[] {
    return this.config.clusters.filter((c) => c.slack && (c.slack.channel === channel || this.learned.get(c.slack.channel) === channel)).map((c) => c.name);
  }

  /** A mention of a cluster's channel: `<#C123>` when the id is known, else `#name`. */
  mention(cluster: string): string {
    const id = this.channelIdOf(cluster);
    if (id !== undefined) return `<#${id}>`;
    return this.channelOf(cluster) ?? '(no channel)';
  }
}
