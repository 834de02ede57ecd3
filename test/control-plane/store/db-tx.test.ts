/**
 * The store's asynchronous door (store/db.ts) on both engines: a transaction's queries run on its own connection
 * whoever calls them (AsyncLocalStorage), others wait for it (SQLite) or do not see it (PostgreSQL) until it commits;
 * a throw rolls everything back and drops its after-commit work; a nested `tx` joins the outer one; `once` reads a
 * key once per transaction (what a create's quota checks share, services/quotas.ts `basis`).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import t, { type Test } from 'tap';
import { openDb, TxMemo, type Db } from '../../../control-plane/src/store/db.js';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { startPostgres } from '../../helpers/postgres.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function count(db: Db): Promise<number> {
  const r = await sql<{ n: number }>`SELECT COUNT(*) AS n FROM rate_limits`.execute(db.q());
  return Number(r.rows[0]!.n);
}

const put = (db: Db, key: string) =>
  db.q().insertInto('rate_limits').values({ bucket: key, window_start_ms: 0, count: 1 }).execute();

async function semantics(t: Test, db: Db) {
  const order: string[] = [];
  const inTx = db.tx(async () => {
    await put(db, 'a');
    order.push('tx: inserted');
    db.afterCommit(() => order.push('after commit'));
    await sleep(100);
    order.push('tx: done');
    return 'value';
  });
  await sleep(20);
  const outside = count(db).then((n) => order.push(`outside sees ${n}`));
  t.equal(await inTx, 'value', 'tx returns what fn returns');
  await outside;
  t.same(order.filter((o) => !o.startsWith('outside')), ['tx: inserted', 'tx: done', 'after commit'], 'after-commit work runs after the body, once');
  // SQLite: the one connection is the transaction's until it ends, so a reader outside waits and sees the commit;
  // PostgreSQL: a reader on another connection does not wait and sees nothing uncommitted.
  t.same(order.filter((o) => o.startsWith('outside')), [db.engine === 'sqlite' ? 'outside sees 1' : 'outside sees 0'], 'a reader outside the transaction');

  await t.rejects(
    db.tx(async () => {
      await put(db, 'b');
      await db.tx(async () => put(db, 'c'));
      db.afterCommit(() => order.push('never'));
      throw new Error('boom');
    }),
    { message: 'boom' },
  );
  t.equal(await count(db), 1, 'the rolled-back transaction (and the nested one that joined it) left nothing');
  t.notOk(order.includes('never'), 'after-commit work of a rolled-back transaction never runs');

  db.afterCommit(() => order.push('outside: at once'));
  t.equal(order[order.length - 1], 'outside: at once');

  // Two transactions racing for the same row: a conditional UPDATE is a compare-and-set, exactly one wins.
  const wins = await Promise.all(
    [1, 2, 3, 4].map((i) =>
      db.tx(async () => {
        const r = await db.q().updateTable('rate_limits').set({ count: 1 + i }).where('bucket', '=', 'a').where('count', '=', 1).executeTakeFirst();
        await sleep(10);
        return Number(r.numUpdatedRows);
      }),
    ),
  );
  t.same(wins.sort(), [0, 0, 0, 1], 'exactly one compare-and-set wins');

  // once: per transaction and key; outside a transaction, every time.
  const memo = new TxMemo<number>();
  const reads: string[] = [];
  const read = (key: string) => db.once(memo, key, async () => {
    reads.push(key);
    return count(db);
  });
  const inOne = await db.tx(async () => [await read('x'), await read('x'), await read('y'), await db.tx(() => read('x'))]);
  t.same(inOne, [1, 1, 1, 1]);
  t.same(reads, ['x', 'y'], 'one read per key in a transaction, a nested one sharing it');
  await db.tx(async () => read('x'));
  t.same(reads, ['x', 'y', 'x'], 'the next transaction reads again');
  await read('x');
  await read('x');
  t.same(reads, ['x', 'y', 'x', 'x', 'x'], 'outside a transaction, every call reads');
}

t.test('sqlite', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'store-core-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const db = openDb(path.join(dir, 'x.sqlite'));
  t.teardown(() => db.close());
  t.equal(db.engine, 'sqlite');
  await semantics(t, db);
});

t.test('postgres', async (t) => {
  const server = await startPostgres();
  t.teardown(server.stop);
  const db = await openStoreDb({ databaseUrl: server.url, dataDir: '/nonexistent' });
  t.teardown(() => db.close());
  t.equal(db.engine, 'postgres');
  t.equal(db.path, 'postgres', 'the URL (it may hold a password) is not the path');
  await semantics(t, db);
});
