import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { OPAQUE_ID_PATTERN } from '../../src/slack/blocks/index.js';
import { ButtonIds, candidateActions } from '../../src/slack/buttons.js';
import { SocketWatchdog } from '../../src/slack/watchdog.js';
import { openStore, type Store } from '../../src/store/index.js';
import { finding } from '../store/helpers.js';

const T = Date.UTC(2026, 10, 20, 12, 0, 0);
const restartDs = { action: 'restart' as const, workload: { kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds' } };

describe('ButtonIds', () => {
  let store: Store;
  beforeEach(async () => {
    store = await openStore(':memory:');
    await store.findings.save('prod', [finding()], T);
  });
  afterEach(async () => await store.close());

  it('ids are opaque, stable for a key, and differ per finding, action and key', () => {
    const a = new ButtonIds('xoxb-1', store);
    const id = a.idFor('f-multus', restartDs);
    expect(id).toMatch(OPAQUE_ID_PATTERN);
    expect(id).toHaveLength(22);
    expect(new ButtonIds('xoxb-1', store).idFor('f-multus', restartDs)).toBe(id);
    expect(new ButtonIds('xoxb-2', store).idFor('f-multus', restartDs)).not.toBe(id);
    expect(a.idFor('f-other', restartDs)).not.toBe(id);
    const all = candidateActions(finding()).map((x) => a.idFor('f-multus', x));
    expect(new Set(all).size).toBe(all.length);
    expect(id).not.toContain('multus');
  });

  it('resolves an id to the finding, action and target read from the store, also in a fresh process', async () => {
    const id = new ButtonIds('xoxb-1', store).idFor('f-multus', restartDs);
    const fresh = new ButtonIds('xoxb-1', store); // empty cache: found by recomputing from stored findings
    expect(await fresh.resolve(id)).toMatchObject({
      kind: 'restart',
      target: { cluster: 'prod', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-multus-ds', findingId: 'f-multus' },
      finding: { id: 'f-multus', status: 'open' },
    });
    const snooze = fresh.idFor('f-multus', { action: 'snooze', days: 7 });
    expect(await fresh.resolve(snooze)).toMatchObject({ kind: 'snooze', action: { action: 'snooze', days: 7 }, target: { kind: 'ServiceAccount', name: 'multus' } });
  });

  it('an unknown, malformed or stale id resolves to nothing', async () => {
    const ids = new ButtonIds('xoxb-1', store);
    const id = ids.idFor('f-multus', restartDs);
    expect(await ids.resolve('AAAAAAAAAAAAAAAAAAAAAA')).toBeUndefined();
    expect(await ids.resolve('kube-system/kube-multus-ds')).toBeUndefined();
    expect(await ids.resolve(`${id.slice(0, -1)}${id.endsWith('A') ? 'B' : 'A'}`)).toBeUndefined();
    expect(await new ButtonIds('xoxb-other', store).resolve(id)).toBeUndefined();
    // The workload is no longer part of the finding: its restart button is dead.
    await store.findings.save('prod', [finding({ workloads: [{ kind: 'Deployment', namespace: 'kube-system', name: 'other' }] })], T + 1);
    expect(await ids.resolve(id)).toBeUndefined();
  });
});

describe('SocketWatchdog', () => {
  /** A Socket Mode client double emitting the SocketModeClient state events. */
  class Client extends EventEmitter {
    starts = 0;
    disconnects = 0;
    async start(): Promise<void> {
      this.starts++;
      this.emit('connecting');
      this.emit('connected');
    }
    async disconnect(): Promise<void> {
      this.disconnects++;
      this.emit('disconnected');
    }
  }

  it('tracks the connection in the gauge and restarts a socket that stays down', async () => {
    const metrics = new Metrics();
    const c = new Client();
    let now = 0;
    const w = new SocketWatchdog(c, { logger: createLogger({ level: 'silent' }), metrics, staleMs: 60_000, now: () => now });
    expect(await metrics.text()).toContain('tokenwatch_slack_socket_connected 0');
    c.emit('connected');
    expect(w.isConnected).toBe(true);
    expect(await metrics.text()).toContain('tokenwatch_slack_socket_connected 1');
    now = 10 * 60_000;
    expect(w.check()).toBe(false); // connected: nothing to do however long ago
    c.emit('reconnecting');
    expect(await metrics.text()).toContain('tokenwatch_slack_socket_connected 0');
    now += 59_000;
    expect(w.check()).toBe(false);
    now += 1_000;
    expect(w.check()).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect([c.disconnects, c.starts, w.restarts]).toEqual([1, 1, 1]);
    expect(w.isConnected).toBe(true);
    expect(await metrics.text()).toContain('tokenwatch_slack_socket_connected 1');
  });
});
