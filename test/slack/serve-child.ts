/**
 * Child process for the kill -9 tests (test/slack/crash.test.ts): the real `tokenwatch serve` with the Bolt app in
 * HTTP mode (the harness, see harness.ts) against fakes running in the parent process, on a scenario directory the
 * parent prepared. Prints one JSON line `{ "eventsUrl": … }` once serving; the parent then clicks and kills it with
 * SIGKILL at the step under test (no cleanup runs).
 * argv[2]: JSON `{ dir, slackApiUrl, kubeUrl, start?, sweep?, paging? }` (see `job` below).
 */
import type { FakeSlack } from '../../src/sandbox/fakes/slack.js';
import type { FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import type { Config } from '../../src/config/index.js';
import { startHarness } from './harness.js';

const job = JSON.parse(process.argv[2]!) as {
  dir: string;
  slackApiUrl: string;
  kubeUrl: string;
  /** The service clock's start (epoch ms; default the harness's). */
  start?: number;
  /** Runs the approval expiry sweep once after the start, before serving. */
  sweep?: boolean;
  /** `slack.paging` targets (the fakes' URLs) with the fake's routing key. */
  paging?: { after: number; pagerdutyUrl: string; webhookUrl: string; routingKey: string };
  /** The PostgreSQL store instead of the SQLite file (`config.store.postgres`); this process then owns every cluster. */
  postgres?: NonNullable<Config['store']['postgres']>;
};
const paging = job.paging;
const h = await startHarness({
  dir: job.dir,
  fakeSlack: { apiUrl: job.slackApiUrl } as FakeSlack,
  kube: { url: job.kubeUrl } as FakeKube,
  ...(job.start !== undefined ? { start: job.start } : {}),
  ...(job.postgres ? { owner: () => true } : {}),
  tweak: (c) => {
    if (paging) {
      c.slack!.paging = { after: paging.after, pagerduty: { url: paging.pagerdutyUrl }, webhook: { url: paging.webhookUrl } };
      c.slack!.pagerdutyRoutingKey = paging.routingKey;
    }
    if (job.postgres) c.store.postgres = job.postgres;
  },
});
if (job.sweep) {
  await h.bot.sweep();
  await h.bot.idle();
}
process.stdout.write(`${JSON.stringify({ eventsUrl: h.bot.eventsUrl })}\n`);
