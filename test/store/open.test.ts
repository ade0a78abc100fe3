import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.js';
import { StoreError } from '../../src/store/errors.js';
import { MIGRATIONS } from '../../src/store/migrations.js';

/** The schema version this build writes: one per migration. */
const SCHEMA_VERSION = MIGRATIONS.length;
import type { Store } from '../../src/store/types.js';
import { approval, finding, staleRecord, T0, tempDir } from './helpers.js';

const open: Store[] = [];
function track(s: Store): Store {
  open.push(s);
  return s;
}
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

describe('openStore', () => {
  it('creates the directory, uses WAL, foreign keys and the current schema', async () => {
    const path = join(tempDir(), 'nested', 'deeper', 'tokenwatch.db');
    const store = track(await openStore(path));
    expect(existsSync(path)).toBe(true);
    expect(store.path).toBe(path);
    expect(store.schemaVersion).toBe(SCHEMA_VERSION);
    await store.polls.setCursor('s', 'c');
    expect(existsSync(`${path}-wal`)).toBe(true);
    const raw = new Database(path, { readonly: true });
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(raw.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(
      raw
        .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .all()
        .map((r) => r.name),
    ).toEqual(['action_log', 'alert_group_intents', 'alert_intents', 'alert_pages', 'alert_refs', 'approvals', 'cluster_owners', 'cursors', 'findings', 'message_refs', 'missed_polls', 'poll_runs', 'poller_lock', 'rate_buckets', 'replicas', 'scan_requests', 'seen', 'slack_notices', 'slack_outbox', 'slack_seen_requests', 'startup_polls', 'token_metric_samples', 'token_records', 'votes', 'webhook_batches']);
    raw.close();
  });

  it('enforces foreign keys', async () => {
    const store = track(await openStore(':memory:'));
    await expect(store.slackRefs.saveMessageRef('no-such-finding', { channel: 'C1', ts: '1.1', severity: 'info', hash: 'h' })).rejects.toThrow(
      new StoreError('saveMessageRef: finding no-such-finding is not stored (save the finding first)'),
    );
  });

  it('migrates a version-1 database (live mode only) to the current schema, keeping its data', async () => {
    const path = join(tempDir(), 'old.db');
    const v1 = await openStore(path, { migrations: MIGRATIONS.slice(0, 1) });
    expect(v1.schemaVersion).toBe(1);
    await v1.polls.setCursor('file:/a.log', '{"ino":1,"pos":10}');
    await v1.findings.save('prod', [finding()], T0);
    await v1.tokenRecords.upsert([staleRecord()]);
    await v1.close();
    const raw = new Database(path);
    expect(raw.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'approvals'").get()).toEqual({ n: 0 });
    raw.close();

    const store = track(await openStore(path));
    expect(store.schemaVersion).toBe(SCHEMA_VERSION);
    expect(await store.polls.getCursor('file:/a.log')).toBe('{"ino":1,"pos":10}');
    expect((await store.findings.get('f-multus'))?.finding).toEqual(finding());
    expect(await store.tokenRecords.list('prod')).toEqual([staleRecord()]);
    await store.slackRefs.saveMessageRef('f-multus', { channel: 'C1', ts: '1.1', severity: 'warning', hash: 'h' });
    expect((await store.approvals.create(approval())).state).toBe('requested');
  });

  it('migrates an empty file (version 0)', async () => {
    const path = join(tempDir(), 'empty.db');
    new Database(path).close();
    expect(track(await openStore(path)).schemaVersion).toBe(SCHEMA_VERSION);
  });

  it('refuses a database newer than it knows, and leaves it untouched', async () => {
    const path = join(tempDir(), 'new.db');
    const raw = new Database(path);
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();
    await expect(openStore(path)).rejects.toThrow(
      new StoreError(
        `store ${path} has schema version ${SCHEMA_VERSION + 1}, newer than this tokenwatch supports (${SCHEMA_VERSION}); upgrade tokenwatch or point store.path at another file`,
      ),
    );
    const again = new Database(path);
    expect(again.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION + 1);
    expect(again.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get()).toEqual({ n: 0 });
    again.close();
  });

  it('refuses a file that is not a database', async () => {
    const path = join(tempDir(), 'text.db');
    writeFileSync(path, 'this is not sqlite '.repeat(100));
    await expect(openStore(path)).rejects.toThrow(StoreError);
    await expect(openStore(path)).rejects.toThrow(/^cannot open store .*text\.db: not a tokenwatch SQLite database/);
  });

  it('refuses a torn store (pages 2–4 zeroed) at start, naming the file, and leaves the file as it was', async () => {
    const path = join(tempDir(), 'torn.db');
    const s1 = await openStore(path);
    await s1.findings.save('prod', Array.from({ length: 40 }, (_, i) => finding({ id: `f-${i}`, serviceAccount: `sa-${i}` })), T0);
    await s1.tokenRecords.upsert(Array.from({ length: 40 }, (_, i) => staleRecord({ pod: `pod-${i}`, podUid: `uid-${i}` })));
    await s1.close();
    const pageSize = 4096;
    expect(statSync(path).size).toBeGreaterThan(6 * pageSize);
    const bytes = readFileSync(path);
    expect(bytes.readUInt16BE(16)).toBe(pageSize);
    bytes.fill(0, pageSize, 4 * pageSize);
    writeFileSync(path, bytes);

    let thrown: unknown;
    try {
      await openStore(path);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(StoreError);
    const message = (thrown as Error).message;
    expect(message.startsWith(`store ${path} is damaged: SQLite's integrity check (PRAGMA quick_check) failed: `)).toBe(true);
    expect(message).toContain('tokenwatch will not start on it: restore the file from a backup, or move it aside');
    expect(readFileSync(path).equals(bytes)).toBe(true);
  });

  it('passes the integrity check of a healthy store with data', async () => {
    const path = join(tempDir(), 'healthy.db');
    const s1 = await openStore(path);
    await s1.findings.save('prod', [finding()], T0);
    await s1.close();
    expect((await track(await openStore(path)).findings.get('f-multus'))?.finding).toEqual(finding());
  });

  it('is idempotent to open twice and to close twice', async () => {
    const path = join(tempDir(), 'twice.db');
    const a = await openStore(path);
    const b = track(await openStore(path));
    await a.polls.setCursor('x', '1');
    expect(await b.polls.getCursor('x')).toBe('1');
    await a.close();
    await a.close();
    expect(b.schemaVersion).toBe(SCHEMA_VERSION);
  });
});

describe('reopen', () => {
  it('keeps every kind of data across close and open', async () => {
    const path = join(tempDir(), 'keep.db');
    const s1 = await openStore(path);
    await s1.polls.setCursor('cw', 'token-1');
    await s1.polls.markSeen('prod', ['a', 'b'], T0);
    await s1.tokenRecords.upsert([staleRecord()]);
    await s1.findings.save('prod', [finding()], T0);
    await s1.slackRefs.saveMessageRef('f-multus', { channel: 'C1', ts: '1700000000.000100', severity: 'warning', hash: 'abc' });
    const run = await s1.polls.startRun('prod', 'cw', T0);
    await s1.polls.finishRun(run, { endedAt: T0 + 1000, events: 7, tokenUses: 2 });
    await s1.approvals.create(approval());
    await s1.actions.log({ at: T0, cluster: 'prod', actor: 'U0REQ', action: 'restart.requested', target: 'DaemonSet kube-system/kube-multus-ds', result: 'requested' });
    await s1.close();

    const s2 = track(await openStore(path));
    expect(await s2.polls.getCursor('cw')).toBe('token-1');
    expect(await s2.polls.markSeen('prod', ['a', 'b', 'c'], T0)).toEqual(['c']);
    expect(await s2.tokenRecords.list('prod')).toEqual([staleRecord()]);
    expect((await s2.findings.list('prod')).map((f) => f.id)).toEqual(['f-multus']);
    expect(await s2.slackRefs.getMessageRef('f-multus')).toEqual({ channel: 'C1', ts: '1700000000.000100', severity: 'warning', hash: 'abc' });
    expect(await s2.polls.lastRuns()).toMatchObject([{ cluster: 'prod', events: 7, tokenUses: 2, lastSuccessAt: T0 + 1000 }]);
    expect(await s2.approvals.get('appr-1')).toEqual({ ...approval(), message: null, subject: { namespace: 'kube-system', serviceAccount: 'multus' } });
    expect(await s2.actions.list('prod')).toHaveLength(1);
  });
});

describe('openStore errors name the file and the reason', () => {
  it('a directory in the way of the file: cannot open or create it', async () => {
    const path = join(tempDir(), 'is-a-dir.db');
    mkdirSync(path);
    await expect(openStore(path)).rejects.toThrow(StoreError);
    await expect(openStore(path)).rejects.toThrow(`cannot open store ${path}: it is a directory; point store.path at the database file inside it (e.g. ${join(path, 'tokenwatch.db')})`);
  });

  it('a file where its directory should be: cannot create the directory', async () => {
    const base = tempDir();
    writeFileSync(join(base, 'plain-file'), 'x');
    const path = join(base, 'plain-file', 'tw.db');
    await expect(openStore(path)).rejects.toThrow(new RegExp(`^cannot open store ${path}: cannot create its directory ${join(base, 'plain-file')} \\(.*(EEXIST|ENOTDIR).*\\)`));
  });

  // Permissions do not bind root (the CI container runs as root): there, the opening runs in a child process as
  // nobody (uid 65534).
  it('a read-only file and directory: says read-only, and what must be writable', async () => {
    const dir = tempDir();
    const path = join(dir, 'ro.db');
    await (await openStore(path)).close();
    chmodSync(dir, 0o555);
    chmodSync(path, 0o444);
    const expected = /cannot open store .*ro\.db: the file or its directory is read-only \(.*SQLITE_READONLY.*\); tokenwatch writes the file and its -wal and -shm files next to it/;
    try {
      if (process.getuid?.() === 0) {
        const script = `import('${join(process.cwd(), 'src/store/db.ts')}').then(async (m) => { try { await m.openStore(${JSON.stringify(path)}); console.log('opened'); } catch (e) { console.log(e.message); } });`;
        const r = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], { uid: 65534, gid: 65534, encoding: 'utf8', cwd: process.cwd(), timeout: 60_000 });
        expect(r.error?.message, `uid 65534 must be able to run ${process.execPath} and read ${process.cwd()} (.ci/run opens both)`).toBeUndefined();
        expect(r.stdout).toMatch(expected);
        expect(r.stdout).toContain('tokenwatch runs as uid 65534');
      } else {
        await expect(openStore(path)).rejects.toThrow(expected);
      }
    } finally {
      chmodSync(dir, 0o755);
      chmodSync(path, 0o644);
    }
  });
});
