/**
 * Migration steps that move data (src/store/migrations.ts, src/store/migrations-postgres.ts), on every backend: a store
 * written at the step before is opened by the current build, and what earlier versions kept elsewhere is found in its
 * new place.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openPostgresStore, openStore, RepositoryStore } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { migratePostgres, POSTGRES_MIGRATIONS } from '../../src/store/migrations-postgres.js';
import { openPostgres } from '../../src/store/postgres.js';
import type { NewActionLogEntry, Store } from '../../src/store/types.js';
import { createTestDatabase, postgresServer } from '../support/postgres.js';
import { approval, finding, MIN, T0, tempDir } from './helpers.js';

/** A store at schema version `steps`, and how the current build opens (and migrates) it. */
interface Older {
  store: Store;
  upgrade: () => Promise<Store>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const backends: [string, (steps: number) => Promise<Older>][] = [
  [
    'sqlite',
    async (steps) => {
      const path = join(tempDir(), 'older.db');
      const store = await openStore(path, { migrations: MIGRATIONS.slice(0, steps) });
      return {
        store,
        upgrade: async () => {
          await store.close();
          const now = await openStore(path);
          cleanups.push(() => now.close());
          return now;
        },
      };
    },
  ],
];
if (postgresServer().available) {
  backends.push([
    'postgres',
    async (steps) => {
      const db = await createTestDatabase();
      cleanups.push(() => db.drop());
      const sql = openPostgres(db.options);
      const { version } = await migratePostgres(sql, POSTGRES_MIGRATIONS.slice(0, steps));
      const store = new RepositoryStore(sql, db.name, version);
      return {
        store,
        upgrade: async () => {
          await store.close();
          const now = await openPostgresStore(db.options);
          cleanups.push(() => now.close());
          return now;
        },
      };
    },
  ]);
}

/** How many steps come before the step named `name` (found by name, so that steps added before it do not matter). */
function stepsBefore(name: string): number {
  const i = POSTGRES_MIGRATIONS.findIndex((s) => s.name === name);
  if (i < 0) throw new Error(`no migration step named ${name}`);
  return i;
}
const BEFORE_VERIFICATION_COLUMNS = stepsBefore('verification columns');
const BEFORE_SCAN_REQUESTS = stepsBefore('scan requests');

describe.each(backends)('upgrading a store (%s)', (_name, older) => {
  it('backfills the verification and probe-check columns from the action-log rows earlier versions wrote', async () => {
    const { store, upgrade } = await older(BEFORE_VERIFICATION_COLUMNS);
    expect(store.schemaVersion).toBe(BEFORE_VERIFICATION_COLUMNS);
    await store.findings.save('prod', [finding(), finding({ id: 'f-multus-401', kind: 'unauthorized' })], T0);
    for (const id of ['resolved', 'superseded', 'probed', 'open']) await store.approvals.create(approval({ id, state: 'succeeded' }));
    const row = (approvalId: string, action: string, at: number, findingId = 'f-multus'): NewActionLogEntry => ({
      at,
      cluster: 'prod',
      findingId,
      approvalId,
      actor: null,
      action,
      target: 'DaemonSet kube-system/kube-multus-ds',
      result: action.slice(action.indexOf('.') + 1),
      detail: 'as an earlier version wrote it',
    });
    await store.actions.log(row('resolved', 'restart.succeeded', T0 + MIN));
    await store.actions.log(row('resolved', 'probe-check.rewritten', T0 + 2 * MIN));
    await store.actions.log(row('resolved', 'verification.resolved', T0 + 3 * MIN));
    await store.actions.log(row('resolved', 'verification.resolved', T0 + 3 * MIN, 'f-multus-401')); // a sibling concluded with it
    await store.actions.log(row('superseded', 'verification.superseded', T0 + 4 * MIN));
    await store.actions.log(row('probed', 'probe-check.none', T0 + 5 * MIN));
    await store.actions.log(row('open', 'restart.succeeded', T0 + 6 * MIN));

    const now = await upgrade();
    expect(now.schemaVersion).toBe(MIGRATIONS.length);
    const byId = new Map((await now.approvals.list()).map((a) => [a.id, a]));
    expect(byId.get('resolved')).toMatchObject({ verification: { outcome: 'resolved', at: T0 + 3 * MIN }, probeCheck: { outcome: 'rewritten', at: T0 + 2 * MIN } });
    expect(byId.get('superseded')).toMatchObject({ verification: { outcome: 'superseded', at: T0 + 4 * MIN } });
    expect(byId.get('superseded')!.probeCheck).toBeUndefined();
    expect(byId.get('probed')).toMatchObject({ probeCheck: { outcome: 'none', at: T0 + 5 * MIN } });
    expect(byId.get('probed')!.verification).toBeUndefined();
    expect(byId.get('open')!.verification).toBeUndefined();
    expect(byId.get('open')!.probeCheck).toBeUndefined();
    // The history stays, and a backfilled conclusion is not concluded again.
    expect((await now.actions.ofApproval('resolved')).map((r) => r.action)).toEqual(['restart.succeeded', 'probe-check.rewritten', 'verification.resolved', 'verification.resolved']);
    expect(await now.approvals.concludeVerification('resolved', 'recurrence', T0 + 7 * MIN)).toBe(false);
    expect(await now.approvals.concludeProbeCheck('probed', 'rewritten', T0 + 7 * MIN)).toBe(false);
    expect(await now.approvals.concludeVerification('open', 'persisting', T0 + 7 * MIN)).toBe(true);
    expect((await now.approvals.get('open'))!.verification).toEqual({ outcome: 'persisting', at: T0 + 7 * MIN });
  });

  it('moves pending scan requests out of the cursor rows earlier versions kept them in', async () => {
    const { store, upgrade } = await older(BEFORE_SCAN_REQUESTS);
    expect(store.schemaVersion).toBe(BEFORE_SCAN_REQUESTS);
    await store.polls.setCursor('slack:scan-request:prod', String(T0));
    await store.polls.setCursor('slack:scan-request:staging', '0'); // taken already
    await store.polls.setCursor('file:/var/log/audit.log', '{"ino":1,"pos":10}');
    const now = await upgrade();
    expect(await now.scanRequests.take('staging')).toBeUndefined();
    expect(await now.scanRequests.take('prod')).toBe(T0);
    expect(await now.scanRequests.take('prod')).toBeUndefined();
    expect(await now.polls.getCursor('slack:scan-request:prod')).toBeUndefined();
    expect(await now.polls.getCursor('slack:scan-request:staging')).toBeUndefined();
    expect(await now.polls.getCursor('file:/var/log/audit.log')).toBe('{"ino":1,"pos":10}');
  });
});
