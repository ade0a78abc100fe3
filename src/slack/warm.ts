/**
 * Warm-up at start: what the first Slack request after a (re)start needs is done once before any request comes, so
 * that its ack is not slower than the next ones (docs/design/architecture.md "Performance targets": acks within
 * 100 ms at p99, the first request included). V8 compiles a function when it first runs and better-sqlite3 prepares a
 * statement when it is first used; without this the first `/tokens status` paid for both, on the event loop that acks.
 *
 * Done, each step on its own (a failing step is logged at debug and the others still run; nothing is sent to Slack,
 * nothing a user sees changes):
 * 1. the replay guard's store statements (`replay.ts`): a claim of one key that expires at once, which the next
 *    claim prunes;
 * 2. the `/tokens status` path: one cluster's status read and rendered as Block Kit (`TokensCommand.clusterStatus`,
 *    `statusMessage`), not sent;
 * 3. HTTP mode: one signed `ssl_check` request to the app's own `/slack/events` (Slack sends these to check the
 *    endpoint; Bolt's `HTTPReceiver` verifies the signature and answers 200 without running a listener), so the
 *    receiver's body parsing and HMAC check are compiled.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { ErrorCode, TokenwatchError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { StorePart } from '../store/index.js';
import { statusMessage } from './blocks/index.js';
import type { TokensCommand } from './commands.js';

/** Dependencies of {@link warmSlack}. */
export interface WarmDeps {
  store: StorePart<{ replay: 'claim' }>;
  command: Pick<TokensCommand, 'clusterStatus'>;
  /** The cluster whose status is rendered (the first configured one); none: step 2 is left out. */
  cluster?: string;
  /** HTTP mode: the app's events URL and signing secret; absent in Socket Mode (step 3 is left out). */
  http?: { eventsUrl: string; signingSecret: string };
  clock: () => number;
  logger: Logger;
}

/** What {@link warmSlack} did: the steps that ran to the end, and how long it took, ms. */
export interface WarmResult {
  done: Array<'replay-guard' | 'status' | 'http'>;
  ms: number;
}

/** Runs the warm-up (see the module docstring). Never throws. */
export async function warmSlack(deps: WarmDeps): Promise<WarmResult> {
  const t0 = performance.now();
  const done: WarmResult['done'] = [];
  const step = async (name: WarmResult['done'][number], fn: () => Promise<void> | void): Promise<void> => {
    try {
      await fn();
      done.push(name);
    } catch (err) {
      deps.logger.debug({ err, step: name }, 'Slack warm-up step failed (the first request pays for it instead)');
    }
  };
  await step('replay-guard', async () => {
    const now = Date.now();
    await deps.store.replay.claim([`warm-up:${randomBytes(8).toString('hex')}`], now, now);
  });
  if (deps.cluster !== undefined) {
    const cluster = deps.cluster;
    await step('status', async () => {
      statusMessage([await deps.command.clusterStatus(cluster)], { now: deps.clock() });
    });
  }
  if (deps.http) {
    const { eventsUrl, signingSecret } = deps.http;
    await step('http', async () => {
      const body = 'ssl_check=1&token=tokenwatch-warm-up';
      const ts = Math.floor(Date.now() / 1000);
      const signature = `v0=${createHmac('sha256', signingSecret).update(`v0:${ts}:${body}`).digest('hex')}`;
      const res = await fetch(eventsUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-slack-request-timestamp': String(ts), 'x-slack-signature': signature },
        body,
        signal: AbortSignal.timeout(5_000),
      });
      await res.arrayBuffer();
      if (res.status !== 200) throw new TokenwatchError(ErrorCode.Internal, `ssl_check answered HTTP ${res.status}`);
    });
  }
  return { done, ms: performance.now() - t0 };
}
