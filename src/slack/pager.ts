/**
 * Pages out of tokenwatch (docs/slack.md "Paging"): the PagerDuty Events API v2 and a generic JSON webhook, over
 * Node's `fetch`. Secrets (the routing key, the webhook URL, which often carries a token) never appear in errors or
 * logs: an error names the target (`pagerduty`, `webhook`) and the HTTP status only.
 *
 * - PagerDuty: `POST <url>/v2/enqueue` with `{ routing_key, event_action: 'trigger' | 'resolve', dedup_key, payload }`
 *   (payload on trigger: `summary` ≤ 1024 chars, `source`, `severity`, `component`, `group`, `class`, `custom_details`;
 *   `links`), answered `202 {status: 'success', dedup_key}`; 400 = an invalid event, 429 = rate limited, 5xx = try
 *   again (https://developer.pagerduty.com/docs/events-api-v2/trigger-events/,
 *   https://developer.pagerduty.com/api-reference/368ae3d938c9e-send-an-event-to-pager-duty).
 * - Webhook: `POST <url>` with the JSON of {@link WebhookEvent} and the header `Idempotency-Key: <notice key>`; any
 *   2xx is success.
 */
import { ErrorCode, TokenwatchError } from '../errors.js';
import type { OutboxNotice } from '../store/outbox.js';

/** A paging event as queued (src/store/outbox.ts `OutboxNotice.event`): trigger or resolve of one alert. */
export type PageEvent = NonNullable<OutboxNotice['event']>;

/** Where pages go; each given target gets every event. */
export interface PagerTargets {
  pagerduty?: { url: string; routingKey: string };
  webhook?: { url: string };
}

/** The JSON body the generic webhook gets. Times ISO 8601 UTC. */
export interface WebhookEvent {
  /** Body version, 1. */
  version: 1;
  event_action: 'trigger' | 'resolve';
  /** Same for the trigger and the resolve of one alert's episode (as PagerDuty's `dedup_key`). */
  dedup_key: string;
  summary: string;
  severity: 'critical';
  source: string;
  cluster: string;
  /** `namespace/serviceAccount`. */
  subject: string;
  group_id: string;
  /** The alert in Slack, when known. */
  link?: string;
  sent_at: string;
}

/** A page not accepted: `target` and `status` (HTTP status, or 0 for a network error or timeout). */
export class PageError extends TokenwatchError {
  constructor(
    readonly target: 'pagerduty' | 'webhook',
    readonly status: number,
    detail: string,
  ) {
    super(ErrorCode.PageFailed, `paging via ${target} failed: ${detail}`);
    this.name = 'PageError';
  }
}

/** A queued page goes to one target: the item's channel names it. */
export type PageTarget = 'pagerduty' | 'webhook';

/** Sends page events to one target. */
export interface Pager {
  /** Sends `event` to the target of the notice `key` (its last segment). @throws PageError */
  send(event: PageEvent, key: string): Promise<void>;
}

/** The target a page notice key names (`…:pagerduty` or `…:webhook`). */
export function pageTargetOf(key: string): PageTarget {
  return key.endsWith(':webhook') ? 'webhook' : 'pagerduty';
}

/**
 * The {@link Pager} for `targets`, with a per-request timeout (ms, default 10 s).
 * @param now epoch ms, for the webhook's `sent_at`.
 */
export function httpPager(targets: PagerTargets, now: () => number, timeoutMs = 10_000): Pager {
  return {
    async send(event, key) {
      const target = pageTargetOf(key);
      if (target === 'pagerduty') {
        const pd = targets.pagerduty;
        if (!pd) throw new PageError('pagerduty', 0, 'not configured (slack.paging.pagerduty)');
        const body =
          event.action === 'trigger'
            ? {
                routing_key: pd.routingKey,
                event_action: 'trigger',
                dedup_key: event.dedupKey,
                client: 'tokenwatch',
                payload: {
                  summary: event.summary.slice(0, 1024),
                  source: event.source,
                  severity: event.severity,
                  component: event.subject,
                  group: event.cluster,
                  class: 'stale-token',
                  custom_details: { cluster: event.cluster, serviceAccount: event.subject, groupId: event.groupId },
                },
                ...(event.link ? { links: [{ href: event.link, text: 'Alert in Slack' }] } : {}),
              }
            : { routing_key: pd.routingKey, event_action: 'resolve', dedup_key: event.dedupKey };
        await post('pagerduty', `${pd.url.replace(/\/+$/, '')}/v2/enqueue`, body, {}, timeoutMs);
        return;
      }
      const wh = targets.webhook;
      if (!wh) throw new PageError('webhook', 0, 'not configured (slack.paging.webhook)');
      const body: WebhookEvent = {
        version: 1,
        event_action: event.action,
        dedup_key: event.dedupKey,
        summary: event.summary,
        severity: event.severity,
        source: event.source,
        cluster: event.cluster,
        subject: event.subject,
        group_id: event.groupId,
        ...(event.link ? { link: event.link } : {}),
        sent_at: new Date(now()).toISOString(),
      };
      await post('webhook', wh.url, body, { 'idempotency-key': key }, timeoutMs);
    },
  };
}

async function post(target: PageTarget, url: string, body: unknown, headers: Record<string, string>, timeoutMs: number): Promise<void> {
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const why = (err as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : `network error ${(err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name}`;
    throw new PageError(target, 0, why);
  }
  const text = await res.text().catch(() => '');
  if (res.status >= 200 && res.status < 300) return;
  // PagerDuty's 400 names the invalid field ({"status":"invalid event","errors":[…]}); it never echoes the routing key.
  let detail = '';
  if (target === 'pagerduty') {
    try {
      const j = JSON.parse(text) as { message?: string; errors?: string[] };
      detail = [j.message, ...(j.errors ?? [])].filter(Boolean).join('; ').slice(0, 300);
    } catch {
      detail = '';
    }
  }
  throw new PageError(target, res.status, `HTTP ${res.status}${detail ? ` (${detail})` : ''}`);
}
