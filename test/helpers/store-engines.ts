/**
 * The store on both engines, for tests that run the same assertions against each: a fresh SQLite file in a temp dir,
 * or a fresh database on one throwaway PostgreSQL cluster per test file (helpers/postgres.ts, started on first use).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { openDb, type Db } from '../../control-plane/src/store/db.js';
import type { Engine } from '../../control-plane/src/store/engine/migrations.js';
import { openStoreDb } from '../../control-plane/src/store/engine/open.js';
import type { MachineRow } from '../../control-plane/src/store/repos/machines.js';
import { createStore, type Store } from '../../control-plane/src/store/store.js';
import { startPostgres, type TestPostgres } from './postgres.js';

export const ENGINES: readonly Engine[] = ['sqlite', 'postgres'];

export interface StoreEngines {
  /** A new, empty, migrated store on `engine`, closed at `t`'s teardown. */
  open(t: Test, engine: Engine): Promise<Store>;
  /** The PostgreSQL cluster (started if it was not). */
  postgres(): Promise<TestPostgres>;
}

/** `top`: the file's tap object; the cluster is stopped at its teardown. */
export function storeEngines(top: Test): StoreEngines {
  let cluster: Promise<TestPostgres> | null = null;
  let databases = 0;
  const postgres = () => {
    if (cluster) return cluster;
    const started = startPostgres();
    cluster = started;
    top.teardown(async () => (await started).stop());
    return started;
  };
  const openOn = async (engine: Engine): Promise<Db> => {
    if (engine === 'postgres') {
      const url = await (await postgres()).createDatabase(`store_${++databases}`);
      return openStoreDb({ databaseUrl: url, dataDir: '/nonexistent' });
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'store-engines-'));
    top.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    return openDb(path.join(dir, 'control-plane.sqlite'));
  };
  return {
    async open(t, engine) {
      const db = await openOn(engine);
      t.teardown(() => db.close());
      return createStore(db);
    },
    postgres,
  };
}

/** The instant most fixture rows are created at. */
export const T0 = '2026-01-01T00:00:00.000Z';

/** An organization and a user (what most rows reference). */
export async function seedOrg(store: Store, orgId = 'org_a', userId = 'usr_a'): Promise<void> {
  await store.identity.insertOrg({ id: orgId, name: `name of ${orgId}`, personal: 0, created_at: T0 });
  await store.identity.insertUser({ id: userId, email: `${userId}@example.com`, name: null, password_hash: 'hash', personal_org_id: null, created_at: T0 });
}

/** A live machine row, `running`, created at T0 unless told. */
export function machineRow(id: string, over: Partial<MachineRow> = {}): MachineRow {
  return {
    id, org_id: 'org_a', name: id, size: 'small', template: null, region: null, metadata: '{}', state: 'running', agent_token: 'token',
    created_by_kind: 'user', created_by_id: 'usr_a', created_at: T0, updated_at: T0, state_changed_at: T0, deleted_at: null, host_id: null, ...over,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `n` transactions running `fn` at once, each holding its transaction open a moment after `fn` (so on PostgreSQL,
 * where each has its own connection, they overlap); what each returned, sorted (false before true).
 */
export async function race(store: Store, n: number, fn: (i: number) => Promise<boolean>): Promise<boolean[]> {
  const out = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      store.db.tx(async () => {
        const r = await fn(i);
        await sleep(20);
        return r;
      }),
    ),
  );
  return out.sort();
}
