/**
 * A black-holed Slack Web API (accepts TCP connections, never answers): the bot's `auth.test` at start times out after
 * the WebClient's `timeout` instead of holding serve's start, serve polls on without Slack and says `unavailable`,
 * and the log names the call without the bot token.
 */
import { createServer, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { composeServe } from '../../src/runtime/compose.js';
import type { ServeHandle } from '../../src/runtime/serve-options.js';
import { DEFAULT_BOT_TOKEN } from '../../src/sandbox/fakes/slack.js';
import { startSlackWith } from '../../src/runtime/build-slack.js';
import { CLUSTER, configWithSlackAt } from './harness.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('a hung Slack Web API', () => {
  it('times out auth.test at start; serve polls on and reports Slack unavailable', { timeout: 120_000 }, async () => {
    const sockets = new Set<Socket>();
    let accepted = 0;
    const hole = createServer((s) => {
      accepted++;
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => hole.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => {
      for (const s of sockets) s.destroy();
      hole.close(() => r());
    }));
    const port = (hole.address() as { port: number }).port;
    const config = configWithSlackAt(port, 'tw-slack-hung-');
    const lines: Array<Record<string, unknown>> = [];
    const raw: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString('utf8').split('\n')) {
          if (!l.trim()) continue;
          raw.push(l);
          lines.push(JSON.parse(l) as Record<string, unknown>);
        }
        cb();
      },
    });
    const handle: ServeHandle = await composeServe(config, {
      logger: createLogger({ level: 'info', destination }),
      metrics: new Metrics(),
      jitterMs: 0,
      integrationRetryMs: 3_600_000,
      integrations: [async (ctx) => startSlackWith(ctx, { host: '127.0.0.1', channelIntervalMs: 0, retryConfig: { retries: 0 }, requestTimeoutMs: 300 })],
    });
    cleanups.push(() => handle.stop());
    await handle.firstPolls;
    expect(accepted).toBeGreaterThan(0); // it connected: a hang, not a refusal
    expect(handle.readiness().integrations).toEqual({ slack: 'unavailable' });
    expect((await handle.context.store.findings.list(CLUSTER)).length).toBeGreaterThan(0); // polling went on without Slack
    const failure = lines.find((l) => String(l.msg).startsWith('cannot reach Slack'));
    expect(failure?.msg).toContain(`cannot reach Slack at http://127.0.0.1:${port}/api/ (auth.test: network error timeout)`);
    expect(raw.join('\n')).not.toContain(DEFAULT_BOT_TOKEN);
  });
});
