/**
 * A poll of a big window does not hold the event loop for the whole read: the poller reads records in time slices
 * (src/core/slice.ts), so a timer (as an incoming Slack request would) runs while the poll is still reading.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { ClusterPoller } from '../../src/pipeline/poll.js';
import type { AuditSource } from '../../src/sources/types.js';
import { openStore, type Store } from '../../src/store/index.js';
import { auditEvent } from '../sources/events.js';

const T0 = Date.parse('2026-11-20T12:00:00Z');
/** Enough records that reading them takes well over one slice (10 ms) on any machine. */
const RECORDS = 20_000;

let dir: string;
let store: Store;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tw-slices-'));
  store = await openStore(join(dir, 'tw.db'));
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('poll in time slices', () => {
  it('a timer due at the start of a poll runs while the poll is still reading its records', async () => {
    const lines = Array.from({ length: RECORDS }, (_, i) =>
      auditEvent({ auditID: `a${i}`, time: T0 + i, kind: i % 10 === 0 ? 'stale' : 'unauthorized', sourceIP: `10.0.${(i >> 8) & 255}.${i & 255}`, secondsAfterWarning: 7_000_000 }),
    );
    let fired = false;
    /** The number of records the source had handed out when the timer first ran (undefined: not before the end). */
    let firedAfter: number | undefined;
    // A source from memory: every record is a microtask away, none needs I/O — nothing but the poller's slicing lets
    // the timer in before the last record.
    const source: AuditSource = {
      id: 'memory:slices',
      async *poll() {
        for (let i = 0; i < lines.length; i++) {
          if (fired && firedAfter === undefined) firedAfter = i;
          yield lines[i]!;
        }
        return 'end';
      },
    };
    const cluster = parseConfig({ clusters: [{ name: 'prod', audit: { file: { path: join(dir, 'unused.log') } } }] }, {}).clusters[0]!;
    const poller = new ClusterPoller({ cluster, source, store, logger: createLogger({ level: 'silent' }), clock: () => T0 + RECORDS + 60_000 });
    const timer = setTimeout(() => {
      fired = true;
    }, 0);
    const out = await poller.pollOnce();
    clearTimeout(timer);
    expect(out.error).toBeUndefined();
    expect(out.records).toBe(RECORDS);
    expect(firedAfter).toBeDefined();
    expect(firedAfter!).toBeLessThan(RECORDS);
  });
});
