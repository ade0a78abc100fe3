/**
 * A cluster whose watch-cache lists always fail (the API server answers 403 to the list of pods) shows its watch cache
 * as failing in the health model's words (src/observability/health.ts), in /readyz and `/tokens status` — never as
 * syncing or pending — through `tokenwatch serve`, the real Bolt app and the loopback fakes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { blockText, CLUSTER, REQUESTER, startFakes, startHarness, waitFor, type Harness } from '../slack/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

describe('watch cache whose lists always fail', () => {
  it('is failing, with the list error and its start, in /readyz and /tokens status', { timeout: 120_000 }, async () => {
    const { slack, kube } = await startFakes();
    kube.forbid({ verb: 'list', resource: 'pods' });
    h = await startHarness({ fakeSlack: slack, kube });
    const rt = h.serve.context.clusters.get(CLUSTER)!;
    const lists = () => kube.requests.filter((r) => r.verb === 'list' && r.resource === 'pods' && r.namespace === undefined).length;
    // The cache's first list was answered 403: from then on the watch cache is failing, not pending or syncing.
    await waitFor(() => lists() >= 1 && rt.access(h!.now()).watchCache.state !== 'pending');
    const first = rt.access(h.now()).watchCache;
    expect(first.state).toBe('failing');
    const since = first.state === 'failing' ? first.since : undefined;
    // Its retries fail too: still failing, since the first failure.
    await waitFor(() => lists() >= 2);
    await waitFor(() => {
      const s = rt.access(h!.now()).watchCache;
      return s.state === 'failing' && s.at !== undefined && s.at > since!;
    });
    expect(rt.access(h.now()).watchCache).toMatchObject({ state: 'failing', since });

    const forbidden = /^watch cache not synced yet \(pods: forbidden: no permission to list pods \(cluster-wide\).*, since 12:00 UTC$/;
    const body = (await (await fetch(`http://127.0.0.1:${h.serve.port}/readyz`)).json()) as { access: Record<string, Record<string, string>> };
    expect(body.access[CLUSTER]!.watchCache).toMatch(forbidden);
    await h.command(`status ${CLUSTER}`, REQUESTER);
    const status = blockText(h.slack.ephemerals({ user: REQUESTER }).at(-1)!);
    expect(status).toContain('❌ watch cache not synced yet (pods: forbidden: no permission to list pods (cluster-wide)');
    expect(status).not.toMatch(/watch cache: (syncing|pending)/);
  });
});
