/**
 * The Home tab's republish debounce (src/slack/home.ts) on an injected clock: changes from many polls fold into one
 * render per debounce period; each user is published to at most once per period and only when their view differs.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { HomePublisher } from '../../src/slack/home.js';
import type { HomeView } from '../../src/slack/blocks/home.js';
import { multusFinding } from './blocks/fixtures.js';

const T0 = Date.parse('2026-11-29T12:00:00Z');
const DEBOUNCE = 30_000;

function setup(clusterCount = 1) {
  let now = T0;
  const findings = new Map<string, ReturnType<typeof multusFinding>[]>();
  for (let i = 0; i < clusterCount; i++) findings.set(`c-${i}`, []);
  let renders = 0;
  const published: Array<{ user: string; at: number; view: HomeView }> = [];
  const health = { status: 'ok' as const };
  const clusters = new Map([...findings.keys()].map((name) => [name, { config: { name, audit: { file: { path: '/x' } }, kubernetes: { none: true } }, poller: { health: () => health } }]));
  const home = new HomePublisher(
    {
      store: {
        findings: {
          list: (cluster: string) => {
            if (cluster === 'c-0') renders++;
            return (findings.get(cluster) ?? []).map((finding) => ({ finding })) as never;
          },
        },
        approvals: {
          list: async () => [],
        },
      },
      clusters: clusters as never,
      messageOfGroup: async () => undefined,
      permalink: async () => 'https://x',
      approversOf: async () => [],
      publish: async (user, view) => {
        published.push({ user, at: now, view });
      },
      clock: () => now,
      logger: createLogger({ level: 'silent' }),
    },
    { debounceMs: DEBOUNCE },
  );
  return {
    home,
    published,
    renders: () => renders,
    advance: (ms: number) => (now += ms),
    addFinding: (cluster: string, sa: string) => findings.get(cluster)!.push(multusFinding({ cluster, serviceAccount: sa, id: `${cluster}-${sa}` })),
  };
}

describe('Home republish debounce', () => {
  it('one render and one publish per user per period, however many polls of however many clusters changed it', async () => {
    const s = setup(1000);
    await s.home.opened('U0AAAAAAA1');
    await s.home.opened('U0AAAAAAA2');
    expect(s.published.map((p) => p.user)).toEqual(['U0AAAAAAA1', 'U0AAAAAAA2']);
    const rendersAfterOpen = s.renders();

    // Every cluster polls and one finding appears: 1,000 changes within the period.
    s.advance(1000);
    s.addFinding('c-17', 'multus');
    for (let i = 0; i < 1000; i++) s.home.changed();
    s.advance(DEBOUNCE - 1);
    expect(await s.home.tick()).toBe(0);
    expect(s.renders()).toBe(rendersAfterOpen);
    s.advance(1);
    expect(await s.home.tick()).toBe(2);
    expect(s.renders()).toBe(rendersAfterOpen + 1);
    expect(s.published).toHaveLength(4);
    expect(JSON.stringify(s.published.at(-1)!.view)).toContain('c-17');

    // A change right after a publish waits a full period for that user.
    s.addFinding('c-3', 'other');
    s.home.changed();
    s.advance(DEBOUNCE - 1);
    expect(await s.home.tick()).toBe(0);
    s.advance(1);
    expect(await s.home.tick()).toBe(2);

    // Polls that change nothing shown: rendered again once the period passed, same hash, nothing published.
    for (let i = 0; i < 50; i++) s.home.changed();
    s.advance(DEBOUNCE);
    expect(await s.home.tick()).toBe(0);
    expect(s.published).toHaveLength(6);
  });

  it('renders nothing while nobody has opened Home', async () => {
    const s = setup(3);
    s.home.changed();
    s.advance(DEBOUNCE * 10);
    expect(await s.home.tick()).toBe(0);
    expect(s.renders()).toBe(0);
    await s.home.opened('U0AAAAAAA1');
    expect(s.renders()).toBe(1);
    expect(s.published).toHaveLength(1);
  });

  it('a user opening Home sees the latest at once; the debounce then applies to that user from there', async () => {
    const s = setup(1);
    await s.home.opened('U0AAAAAAA1');
    s.addFinding('c-0', 'a');
    s.home.changed();
    s.advance(5000);
    await s.home.opened('U0AAAAAAA1');
    expect(s.published).toHaveLength(2);
    expect(JSON.stringify(s.published[1]!.view)).toContain('kube-system/a');
    // Nothing new since: the due tick publishes nothing.
    s.advance(DEBOUNCE);
    expect(await s.home.tick()).toBe(0);
    // Opening again with the same view: no publish; an invalid user id is ignored.
    await s.home.opened('U0AAAAAAA1');
    await s.home.opened('not-a-user');
    expect(s.published).toHaveLength(2);
  });
});
