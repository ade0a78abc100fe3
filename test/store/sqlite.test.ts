/** The SQLite SqlExecutor: one connection's FIFO queue around async transactions, savepoints, locks, two connections. */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { SqlExecutor } from '../../src/store/sql.js';
import { openSqliteExecutor } from '../../src/store/sqlite.js';
import { tempDir } from './helpers.js';

const opened: SqlExecutor[] = [];
afterEach(async () => {
  for (const x of opened.splice(0)) await x.close();
});
function open(path: string): SqlExecutor {
  const x = openSqliteExecutor(path, { migrations: ['CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL) STRICT;'] });
  opened.push(x);
  return x;
}
const rows = async (x: SqlExecutor) => (await x.all<{ k: string; v: number }>('SELECT k, v FROM t ORDER BY k')).map((r) => [r.k, r.v]);

/** A promise and the function that resolves it (to hold a transaction open until the test says so). */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe('SqliteExecutor', () => {
  it('rolls back everything a transaction wrote when its function throws, and rethrows', async () => {
    const x = open(join(tempDir(), 'rb.db'));
    await x.run('INSERT INTO t (k, v) VALUES (?, ?)', ['a', 1]);
    await expect(
      x.transaction(async (tx) => {
        await tx.run('UPDATE t SET v = ? WHERE k = ?', [2, 'a']);
        await tx.run('INSERT INTO t (k, v) VALUES (?, ?)', ['b', 1]);
        throw new Error('half-way');
      }),
    ).rejects.toThrow('half-way');
    expect(await rows(x)).toEqual([['a', 1]]);
    // and commits, returning the function's value, when it returns
    expect(await x.transaction(async (tx) => (await tx.run('INSERT INTO t (k, v) VALUES (?, ?)', ['c', 3])).changes)).toBe(1);
    expect(await rows(x)).toEqual([['a', 1], ['c', 3]]);
  });

  it('an outside statement waits for an open transaction and never joins it', async () => {
    const x = open(join(tempDir(), 'wait.db'));
    const hold = gate();
    const inside = gate();
    const tx = x.transaction(async (t) => {
      await t.run('INSERT INTO t (k, v) VALUES (?, ?)', ['in-tx', 1]);
      inside.open();
      await hold.opened;
      throw new Error('rolled back');
    });
    await inside.opened;
    const order: string[] = [];
    const outside = x.run('INSERT INTO t (k, v) VALUES (?, ?)', ['outside', 1]).then(() => order.push('outside'));
    const read = x.all('SELECT k FROM t').then((r) => order.push(`read ${r.length}`));
    // Nothing outside runs while the transaction is open (its statements are queued, in order).
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    hold.open();
    await expect(tx).rejects.toThrow('rolled back');
    await Promise.all([outside, read]);
    // The outside insert survived the rollback: it was not part of the transaction.
    expect(order).toEqual(['outside', 'read 1']);
    expect(await rows(x)).toEqual([['outside', 1]]);
  });

  it('a nested transaction is a savepoint: its failure, caught, rolls back only its own writes', async () => {
    const x = open(join(tempDir(), 'sp.db'));
    await x.transaction(async (tx) => {
      await tx.run('INSERT INTO t (k, v) VALUES (?, ?)', ['outer', 1]);
      await tx
        .transaction(async (inner) => {
          await inner.run('INSERT INTO t (k, v) VALUES (?, ?)', ['inner', 1]);
          await inner.transaction(async (deeper) => void (await deeper.run('INSERT INTO t (k, v) VALUES (?, ?)', ['deeper', 1])));
          throw new Error('inner failed');
        })
        .catch(() => undefined);
      await tx.transaction(async (inner) => void (await inner.run('INSERT INTO t (k, v) VALUES (?, ?)', ['kept', 1])));
    });
    expect(await rows(x)).toEqual([['kept', 1], ['outer', 1]]);
  });

  it('lock() is a no-op inside a transaction and refused outside one', async () => {
    const x = open(':memory:');
    await expect(x.lock('approval-target:a')).rejects.toThrow(/only possible inside a transaction/);
    await x.transaction(async (tx) => {
      await tx.lock('approval-target:a');
      await tx.run('INSERT INTO t (k, v) VALUES (?, ?)', ['a', 1]);
    });
    expect(await rows(x)).toEqual([['a', 1]]);
  });

  it('two connections racing a read-modify-write transaction on one file: both commit, one after the other', async () => {
    const path = join(tempDir(), 'race.db');
    const a = open(path);
    const b = open(path);
    await a.run('INSERT INTO t (k, v) VALUES (?, ?)', ['n', 0]);
    const hold = gate();
    const inA = gate();
    // A holds the write lock across an await; B's BEGIN IMMEDIATE must wait (retrying without blocking the event
    // loop, which A needs to finish) instead of interleaving a lost update.
    const first = a.transaction(async (tx) => {
      const { v } = (await tx.get<{ v: number }>('SELECT v FROM t WHERE k = ?', ['n']))!;
      inA.open();
      await hold.opened;
      await tx.run('UPDATE t SET v = ? WHERE k = ?', [v + 1, 'n']);
    });
    await inA.opened;
    const second = b.transaction(async (tx) => {
      const { v } = (await tx.get<{ v: number }>('SELECT v FROM t WHERE k = ?', ['n']))!;
      await tx.run('UPDATE t SET v = ? WHERE k = ?', [v + 1, 'n']);
    });
    hold.open();
    await Promise.all([first, second]);
    expect(await rows(b)).toEqual([['n', 2]]);
  });
});
