/**
 * End to end in headless Chromium: the sandbox (real `serve` pipeline, Slack app in HTTP mode against the fake Slack,
 * simulated cluster, replayed audit log) driven through its channel page as a user would.
 *
 * Needs the Debian `chromium` package (`/usr/bin/chromium`; `.ci/run` installs it); without it the suite is skipped
 * with a message saying so — unless `CI` or TOKENWATCH_REQUIRE_CHROMIUM=1 (set by `.ci/run`) is set, where a missing Chromium is a
 * failure, so CI never passes without having run it. Every step waits for a condition (a message, a header text) to
 * hold, never reads a live-updated message once. Screenshots go to `test/artifacts/` (git-ignored); with TOKENWATCH_UPDATE_DOCS_IMG=1 the
 * alert, approval-thread and Home tab screenshots are also copied to `docs/img/` for the README.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Locator, Page } from 'playwright-core';
import { startSandbox, type SandboxHandle } from '../../src/sandbox/sandbox.js';

const CHROMIUM = '/usr/bin/chromium';
const HAS_CHROMIUM = existsSync(CHROMIUM);
/** Whether a missing Chromium fails (CI): `CI` or `TOKENWATCH_REQUIRE_CHROMIUM` set, not empty, `0` or `false`. */
const REQUIRE_CHROMIUM = [process.env['CI'], process.env['TOKENWATCH_REQUIRE_CHROMIUM']].some((v) => v !== undefined && !['', '0', 'false'].includes(v));
const ARTIFACTS = new URL('../artifacts/', import.meta.url).pathname;
const DOCS_IMG = new URL('../../docs/img/', import.meta.url).pathname;
if (!HAS_CHROMIUM) {
  process.stderr.write(`\n[e2e] SKIPPED: the browser test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium; .ci/run installs it).\n\n`);
}

const title = HAS_CHROMIUM
  ? 'sandbox end to end in headless Chromium'
  : `sandbox end to end in headless Chromium (SKIPPED: ${CHROMIUM} not found; apt-get install -y chromium)`;

// CI (TOKENWATCH_REQUIRE_CHROMIUM=1): a skipped browser test is a failed one.
describe.runIf(!HAS_CHROMIUM && REQUIRE_CHROMIUM)('sandbox end to end in headless Chromium (required)', () => {
  it(`needs Chromium at ${CHROMIUM} (CI / TOKENWATCH_REQUIRE_CHROMIUM set)`, () => {
    expect.fail(`${CHROMIUM} not found: install it (apt-get install -y chromium) or unset CI and TOKENWATCH_REQUIRE_CHROMIUM to skip`);
  });
});

describe.skipIf(!HAS_CHROMIUM)(title, () => {
  let sandbox: SandboxHandle;
  let browser: BrowserContext;
  let page: Page;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'tokenwatch-e2e-'));
    mkdirSync(ARTIFACTS, { recursive: true });
    // ×600: one sandbox hour (a new token turning stale) takes 6 s; polls every second.
    sandbox = await startSandbox({ port: 0, speed: 600, pollEverySeconds: 1, dataDir, reset: true, stepMs: 500, rolloutPollMs: 250, channelIntervalMs: 100, tickMs: 500 });
    const { chromium } = await import('playwright-core');
    // A fresh profile directory (playwright passes it as --user-data-dir).
    browser = await chromium.launchPersistentContext(join(dataDir, 'chromium-profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: { width: 1440, height: 1000 },
    });
    page = browser.pages()[0] ?? (await browser.newPage());
  }, 40_000);

  afterAll(async () => {
    await browser?.close();
    await sandbox?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }, 30_000);

  const shot = async (name: string, target: Page | Locator = page): Promise<string> => {
    const path = join(ARTIFACTS, `sandbox-${name}.png`);
    // A message can be replaced by a live update (chat.update) while it is being captured: try again.
    for (let attempt = 1; ; attempt++) {
      try {
        await target.screenshot({ path, timeout: 5000 });
        return path;
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
  };
  const actAs = async (user: string) => {
    await page.selectOption('[data-testid=user-switcher]', user);
  };
  const confirmDialog = async (expectTitle: string, button: string) => {
    const dialog = page.locator('[data-testid=confirm-dialog]');
    await dialog.waitFor({ state: 'visible', timeout: 5000 });
    expect(await dialog.locator('h3').textContent()).toBe(expectTitle);
    await dialog.getByRole('button', { name: button, exact: true }).click();
    await dialog.waitFor({ state: 'hidden', timeout: 5000 });
  };

  /** Waits until `read()` gives `expected` (a live-updated message is read again until it does), up to `timeout` ms. */
  const until = async <T>(read: () => Promise<T>, expected: T, timeout = 15_000): Promise<void> => {
    await expect.poll(read, { timeout, interval: 100 }).toEqual(expected);
  };
  /** Waits until the text of `target` contains `part`. */
  const untilContains = async (target: Locator, part: string, timeout = 15_000): Promise<void> => {
    await expect.poll(async () => (await target.textContent()) ?? '', { timeout, interval: 100 }).toContain(part);
  };
  /**
   * Opens a channel from the sidebar and waits for its header. The click is repeated until the header shows the channel
   * (up to `timeout` ms): a click that lands while the page redraws its sidebar from the live state can be lost.
   */
  const openChannel = async (name: string, timeout = 20_000): Promise<void> => {
    const header = page.locator('[data-testid=channel-header]');
    await expect
      .poll(
        async () => {
          if (((await header.textContent()) ?? '').includes(`# ${name}`)) return true;
          await page.click(`[data-testid=channel-link][data-channel=${name}]`);
          await expect.poll(async () => (await header.textContent()) ?? '', { timeout: 3000, interval: 100 }).toContain(`# ${name}`).catch(() => undefined);
          return ((await header.textContent()) ?? '').includes(`# ${name}`);
        },
        { timeout, interval: 500 },
      )
      .toBe(true);
  };
  /** Approves the latest approval request in the thread as `users`, one after the other (2 for kube-system). */
  const approveAs = async (request: Locator, users: readonly string[]) => {
    for (const user of users) {
      await actAs(user);
      await request.getByRole('button', { name: 'Approve', exact: true }).click();
      await confirmDialog('Approve: Restart DaemonSet kube-multus-ds?', 'Approve');
    }
  };

  it('alert → /tokens status → restart requested → refused for the requester and an outsider → approved → rollout → recurrence → restart again → recurrence again, never resolved', async () => {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${sandbox.url}?user=U0REQUEST`);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 10_000 });

    // 0. Team routing: the page lists the network team's, the platform team's and the cluster's channels, and opens at
    // the first, #net-alerts, where the routing rule for kube-system DaemonSets sent the Multus alert.
    const links = page.locator('[data-testid=channel-link]');
    await until(() => links.evaluateAll((els) => els.map((e) => e.getAttribute('data-channel'))), ['net-alerts', 'platform', 'ops-prod-eks']);
    expect(await page.locator('[data-testid=channel-link][aria-current=page]').getAttribute('data-channel')).toBe('net-alerts');
    expect(await page.locator('[data-testid=channel-header]').textContent()).toContain('# net-alerts');

    // 1. The Multus alert, rendered from the bot's Block Kit.
    // One alert for the Multus root cause (its stale tokens and the 401s they cause), the fix its primary button.
    const alert = page.locator('#messages .message', { hasText: 'Clients of ServiceAccount kube-system/multus' });
    await alert.waitFor({ state: 'visible', timeout: 15_000 });
    expect(await page.locator('#messages .message', { hasText: 'Clients of ServiceAccount kube-system/multus' }).count()).toBe(1);
    // Live-updated as polls bring the 401s: wait for the header to say so.
    // The severity is in words beside its colour (an emoji may render as a box).
    await until(() => alert.locator('.bk-header').textContent(), '🔴 Critical · prod-eks · kube-system/multus — requests now fail with 401');
    // The channel opens at the critical alerts (posted first), not scrolled to the bottom past them.
    await page.waitForTimeout(1500); // a few more polls and renders: the position must hold
    // Read again until both boxes are there: a box is null while the page redraws the list.
    const firstCriticalInView = async () => {
      const list = await page.locator('#messages').boundingBox();
      const first = await page.locator('#messages > .message .bk-header', { hasText: /^🔴/ }).first().boundingBox();
      return list && first ? { belowTop: first.y - list.y >= 0, aboveBottom: list.y + list.height - (first.y + first.height) >= 0 } : null;
    };
    await until(firstCriticalInView, { belowTop: true, aboveBottom: true });
    // The node probe found Multus's token copied into its kubeconfig on the nodes: the headline fix is the cause's
    // (the thick plugin, from the cause catalogue) and the restart is offered as what it is, a stop-gap.
    await untilContains(alert, 'Fix: Move to the Multus thick plugin');
    await untilContains(alert, 'Stop-gap: restart DaemonSet kube-system/kube-multus-ds: fresh tokens for 90 days, then it recurs');
    const restart = alert.getByRole('button', { name: 'Restart DaemonSet kube-multus-ds — buys 90 days, will recur', exact: true });
    await restart.waitFor();
    expect(await restart.getAttribute('class')).toContain('bk-primary');
    expect(await alert.textContent()).not.toContain('Recreate ServiceAccount');
    expect(await page.locator('.bk-unknown').count()).toBe(0);
    const alertShot = await shot('01-alert', alert);
    // Its first post mentioned the network on-call group, once (later edits drop the line, and notify no one); nothing
    // of Flux is in #net-alerts.
    const netMessages = sandbox.slack.messages('C0NETALERT');
    const versions = netMessages.flatMap((m) => [...m.edits.map((e) => JSON.stringify(e.blocks)), JSON.stringify(m.blocks)]);
    expect(versions.join('').split('<!subteam^S0NETONCAL>')).toHaveLength(2);
    expect(JSON.stringify((netMessages[0]!.edits[0] ?? netMessages[0]!).blocks)).toContain('<!subteam^S0NETONCAL>');
    expect(await page.locator('#messages .message', { hasText: 'flux-system/' }).count()).toBe(0);

    // 2. /tokens status prod-eks: an ephemeral only Riya sees.
    await page.fill('[data-testid=composer]', '/tokens status prod-eks');
    await page.press('[data-testid=composer]', 'Enter');
    const status = page.locator('.message.ephemeral', { hasText: 'Tokenwatch status · prod-eks' });
    await status.waitFor({ state: 'visible', timeout: 10_000 });
    expect(await status.locator('.only-you').textContent()).toContain('Only visible to you');
    await shot('02-status');

    // 2b. The app's Home tab: the fleet's rejection calendar, published by the bot on app_home_opened. Multus, whose
    // requests fail with 401 now, is ranked first, linked to its alert message; the cluster's sources are listed.
    await page.click('[data-testid=home-tab]');
    const home = page.locator('[data-testid=home]');
    await home.waitFor({ state: 'visible', timeout: 5000 });
    const firstAlert = home.locator('.bk-header:text-is("Alerts by days to rejection") ~ .bk-section').first();
    await firstAlert.waitFor({ state: 'visible', timeout: 15_000 });
    expect(await firstAlert.textContent()).toContain('kube-system/multus');
    // Published once when the tab opens: its worst fact is the 401s when one came within the active window, else the
    // passed rejection date (the sandbox's rejected token is used every few sandbox minutes).
    expect(await firstAlert.textContent()).toMatch(/requests now fail with 401|rejection date passed · requests rejected with 401/);
    expect(await firstAlert.locator('a').getAttribute('href')).toMatch(/\/archives\/[A-Z0-9]+\/p\d+$/);
    expect(await home.textContent()).toContain('audit log');
    expect(await page.locator('[data-testid=messages]').isVisible()).toBe(false);
    expect(await home.locator('.bk-unknown').count()).toBe(0);
    const homeShot = await shot('02b-home');
    // 2c. The platform team's channel: the Flux alert, and no Multus alert, no mention.
    await openChannel('platform');
    await page.locator('[data-testid=messages]').waitFor({ state: 'visible', timeout: 5000 });
    const flux = page.locator('#messages .message', { hasText: 'flux-system/helm-controller' });
    await flux.first().waitFor({ state: 'visible', timeout: 15_000 });
    expect(await flux.count()).toBe(1);
    expect(await page.locator('#messages .message', { hasText: 'kube-system/multus' }).count()).toBe(0);
    await shot('02c-platform');
    // The cluster's channel keeps the rest (Fluent Bit in logging), neither Multus nor Flux.
    await openChannel('ops-prod-eks');
    await page.locator('#messages .message', { hasText: 'logging/fluent-bit' }).first().waitFor({ state: 'visible', timeout: 15_000 });
    expect(await page.locator('#messages .message', { hasText: /kube-system\/multus|flux-system\// }).count()).toBe(0);
    // Back to #net-alerts for the restart.
    await openChannel('net-alerts');
    await alert.waitFor({ state: 'visible', timeout: 5000 });

    // 3. Restart, as the requester, through the confirm dialog.
    const podsBefore = sandbox.kube.store.list('Pod', { namespace: 'kube-system' }).map((p) => String((p.metadata as { name: string }).name)).filter((n) => n.startsWith('kube-multus-ds-'));
    expect(podsBefore).toHaveLength(6);
    await restart.click();
    await page.locator('[data-testid=confirm-dialog]').waitFor({ state: 'visible' });
    await shot('03-confirm');
    await confirmDialog('Restart DaemonSet?', 'Request restart');

    // The approval request appears in the alert's thread.
    const thread = page.locator('[data-testid=thread]');
    const request = thread.locator('.message', { hasText: 'Approval needed: Restart DaemonSet kube-multus-ds' });
    await request.waitFor({ state: 'visible', timeout: 15_000 });
    expect(await request.textContent()).toContain('Server-side dry run passed');
    await shot('04-approval-request');

    // 4. The requester cannot approve her own request.
    await request.getByRole('button', { name: 'Approve', exact: true }).click();
    await confirmDialog('Approve: Restart DaemonSet kube-multus-ds?', 'Approve');
    // The refusal is an ephemeral in the thread where she clicked.
    await thread.locator('.message.ephemeral', { hasText: 'You requested this restart, so someone else must approve it' }).waitFor({ state: 'visible', timeout: 10_000 });
    await shot('05-refused-requester');

    // 5. Neither can an outsider.
    await actAs('U0OUTSIDE');
    await request.getByRole('button', { name: 'Approve', exact: true }).click();
    await confirmDialog('Approve: Restart DaemonSet kube-multus-ds?', 'Approve');
    await thread.locator('.message.ephemeral', { hasText: 'You are not an approver for prod-eks' }).waitFor({ state: 'visible', timeout: 10_000 });
    // Ephemerals are per user: the outsider does not see Riya's refusal.
    expect(await thread.locator('.message.ephemeral', { hasText: 'someone else must approve it' }).count()).toBe(0);
    await shot('06-refused-outsider');
    expect(sandbox.kube.requestsMatching((r) => r.method === 'PATCH' && !r.dryRun)).toHaveLength(0);

    // 6. kube-system is protected (as the chart and kustomize base ship it): the request says it needs 2 approvals.
    expect(await request.textContent()).toContain('kube-system is protected: 2 approvals');
    // The first approver approves: recorded, 1 of 2, nothing patched yet.
    await actAs('U0APPROVE');
    await request.getByRole('button', { name: 'Approve', exact: true }).click();
    await confirmDialog('Approve: Restart DaemonSet kube-multus-ds?', 'Approve');
    await thread.locator('.message.ephemeral', { hasText: 'Your approval is recorded (1 of 2)' }).waitFor({ state: 'visible', timeout: 10_000 });
    expect(sandbox.kube.requestsMatching((r) => r.method === 'PATCH' && !r.dryRun)).toHaveLength(0);
    // The second approver approves: the DaemonSet is patched once and rolls.
    await actAs('U0APPROVB');
    await request.getByRole('button', { name: 'Approve', exact: true }).click();
    await confirmDialog('Approve: Restart DaemonSet kube-multus-ds?', 'Approve');
    await thread.locator('.message', { hasText: 'Rolling out DaemonSet kube-system/kube-multus-ds' }).or(thread.locator('.message', { hasText: 'Rollout of DaemonSet kube-system/kube-multus-ds in prod-eks complete' })).first().waitFor({ state: 'visible', timeout: 15_000 });
    await shot('07-rollout');
    await thread.locator('.message', { hasText: 'Rollout of DaemonSet kube-system/kube-multus-ds in prod-eks complete' }).waitFor({ state: 'visible', timeout: 20_000 });
    await thread.locator('.message .bk-header', { hasText: 'Done: Restart DaemonSet kube-multus-ds' }).waitFor({ state: 'visible', timeout: 10_000 });
    const patches = sandbox.kube.requestsMatching((r) => r.method === 'PATCH' && r.resource === 'daemonsets' && r.name === 'kube-multus-ds');
    expect(patches.filter((r) => !r.dryRun)).toHaveLength(1);
    const podsAfter = sandbox.kube.store.list('Pod', { namespace: 'kube-system' }).map((p) => String((p.metadata as { name: string }).name)).filter((n) => n.startsWith('kube-multus-ds-'));
    expect(podsAfter).toHaveLength(6);
    expect(podsAfter.filter((n) => podsBefore.includes(n))).toEqual([]);
    // The cluster panel shows the new pods.
    await page.locator('[data-testid=cluster] li', { hasText: podsAfter[0]! }).waitFor({ state: 'visible', timeout: 5000 });

    // 7. Verification: one sandbox hour later the copied Multus token is stale again — a recurrence naming the fix.
    // Replies only: the alert shown above them (the thread parent) names the recurrence too once it came.
    const replies = thread.locator('#thread-body > .message');
    const recurrences = replies.filter({ hasText: 'Recurrence' });
    const recurrence = recurrences.first();
    await recurrence.waitFor({ state: 'visible', timeout: 30_000 });
    const text = (await recurrence.textContent()) ?? '';
    expect(text).toContain('stale token use by kube-system/multus in prod-eks came back');
    expect(text).toContain('A restart only rewrites the copied token');
    expect(text).toContain('thick plugin');
    // The alert itself says it now: the stale tokens came back after a restart.
    await untilContains(alert, 'the stale tokens came back after a restart');
    expect(await alert.textContent()).toContain('Fix: Move to the Multus thick plugin');
    expect(await page.locator('.bk-unknown').count()).toBe(0);
    await shot('09-page');

    // 8. Restart again after the recurrence (the stale-token signal is quieter now, the alert is the same): approved
    // twice, rolled out, and one sandbox hour later a second Recurrence — never "Verified … resolved".
    await actAs('U0REQUEST');
    await alert.getByRole('button', { name: /^Restart DaemonSet kube-multus-ds/ }).click();
    await confirmDialog('Restart DaemonSet?', 'Request restart');
    // The first request now reads "Done"; the new one is the request with Approve buttons.
    const second = thread.locator('.message', { hasText: 'Approval needed: Restart DaemonSet kube-multus-ds', has: page.getByRole('button', { name: 'Approve', exact: true }) });
    await second.waitFor({ state: 'visible', timeout: 15_000 });
    await approveAs(second, ['U0APPROVE', 'U0APPROVB']);
    const completes = thread.locator('.message', { hasText: 'Rollout of DaemonSet kube-system/kube-multus-ds in prod-eks complete' });
    await until(() => completes.count(), 2, 30_000);
    await until(() => recurrences.count(), 2, 40_000);
    expect(await replies.filter({ hasText: 'Verified' }).count()).toBe(0);
    expect(await alert.locator('.bk-header').textContent()).not.toMatch(/^✅|resolved/);
    expect(sandbox.kube.requestsMatching((r) => r.method === 'PATCH' && r.resource === 'daemonsets' && r.name === 'kube-multus-ds' && !r.dryRun)).toHaveLength(2);
    expect(await page.locator('.bk-unknown').count()).toBe(0);
    // The approval thread as the requester sees it (her ephemerals included), whole and wider, for the README.
    await actAs('U0REQUEST');
    await thread.locator('.message.ephemeral', { hasText: 'someone else must approve it' }).waitFor({ state: 'visible', timeout: 5000 });
    await page.addStyleTag({ content: '#thread { width: 760px; } #thread .thread-parent { display: none; } #thread-body { overflow: visible; flex: none; }' });
    await page.setViewportSize({ width: 1600, height: 2400 });
    const threadShot = await shot('08-approval-thread', page.locator('#thread-body'));
    expect(errors).toEqual([]);

    if (process.env.TOKENWATCH_UPDATE_DOCS_IMG === '1') {
      mkdirSync(DOCS_IMG, { recursive: true });
      copyFileSync(alertShot, join(DOCS_IMG, 'sandbox-alert.png'));
      copyFileSync(threadShot, join(DOCS_IMG, 'sandbox-approval-thread.png'));
      copyFileSync(homeShot, join(DOCS_IMG, 'sandbox-home.png'));
    }
  }, 180_000);
});
