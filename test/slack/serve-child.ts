/**
 * Child process for the kill -9 tests (test/slack/crash.test.ts): the real `tokenwatch serve` with the Bolt app in
 * HTTP mode (the harness, see harness.ts) against fakes running in the parent process, on a scenario directory the
 * parent prepared. Prints one JSON line `{ "eventsUrl": … }` once serving; the parent then clicks and kills it with
 * SIGKILL at the step under test (no cleanup runs).
 * argv[2]: JSON `{ dir, slackApiUrl, kubeUrl }`.
 */
import type { FakeSlack } from '../../src/sandbox/fakes/slack.js';
import type { FakeKube } from '../../src/sandbox/fakes/kubernetes.js';
import { startHarness } from './harness.js';

const job = JSON.parse(process.argv[2]!) as { dir: string; slackApiUrl: string; kubeUrl: string };
const h = await startHarness({
  dir: job.dir,
  fakeSlack: { apiUrl: job.slackApiUrl } as FakeSlack,
  kube: { url: job.kubeUrl } as FakeKube,
});
process.stdout.write(`${JSON.stringify({ eventsUrl: h.bot.eventsUrl })}\n`);
