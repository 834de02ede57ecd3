/**
 * Machine secrets: sealed values (control-plane/src/secrets/crypto.ts), never plaintext. A row is one
 * name of one machine; replacing it bumps `version`. Delivery is recorded per row as the version and
 * the machine boot (its state_changed_at) it reached, so a stop or restart invalidates it without a write.
 */
import type { Db } from '../db.js';
import type { Keyset } from '../pagination.js';
import { dialect } from './dialect.js';
import { changes, one } from './results.js';

export interface SecretRow {
  id: string;
  org_id: string;
  machine_id: string;
  name: string;
  version: number;
  key_id: string;
  sealed: Buffer;
  value_bytes: number;
  created_at: string;
  updated_at: string;
  delivered_at: string | null;
  delivered_version: number | null;
  delivered_boot: string | null;
}

export function secretsRepo(db: Db) {
  const d = dialect(db.engine);
  return {
    get: (machineId: string, name: string): Promise<SecretRow | undefined> =>
      db.q().selectFrom('machine_secrets').selectAll().where('machine_id', '=', machineId).where('name', '=', name).executeTakeFirst(),
    forMachine: (machineId: string): Promise<SecretRow[]> =>
      db.q().selectFrom('machine_secrets').selectAll().where('machine_id', '=', machineId).orderBy('name', d.asc).execute(),
    /** Sealed secrets in the whole database (a missing keyring with any of them is a lost keyring). */
    countAll: async (): Promise<number> =>
      (await db.q().selectFrom('machine_secrets').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n,
    /** Count and total value size of a machine's secrets, leaving one name out (the one being replaced). */
    usage: (machineId: string, except: string): Promise<{ n: number; bytes: number }> =>
      db.q().selectFrom('machine_secrets')
        .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.coalesce(eb.fn.sum<number>('value_bytes'), eb.lit(0)).as('bytes')])
        .where('machine_id', '=', machineId).where('name', '<>', except).executeTakeFirstOrThrow(),
    pageOrg: (orgId: string, after: Keyset, limit: number): Promise<SecretRow[]> =>
      db.q().selectFrom('machine_secrets').selectAll().where('org_id', '=', orgId).where((eb) => d.after(eb, after))
        .orderBy('created_at', d.asc).orderBy('id', d.asc).limit(limit).execute(),
    async insert(r: SecretRow): Promise<void> {
      await db.q().insertInto('machine_secrets').values(r).execute();
    },
    /** Replace the sealed value, compare-and-set on the version that was read. */
    async replace(id: string, fromVersion: number, to: { version: number; key_id: string; sealed: Buffer; value_bytes: number; updated_at: string }): Promise<boolean> {
      return one(
        await db.q().updateTable('machine_secrets')
          .set({ version: to.version, key_id: to.key_id, sealed: to.sealed, value_bytes: to.value_bytes, updated_at: to.updated_at })
          .where('id', '=', id).where('version', '=', fromVersion).executeTakeFirst(),
      );
    },
    /** Re-seal under another key (rotation): same version, compare-and-set on the old key id. */
    async reseal(id: string, version: number, fromKey: string, to: { key_id: string; sealed: Buffer }): Promise<boolean> {
      return one(
        await db.q().updateTable('machine_secrets').set({ key_id: to.key_id, sealed: to.sealed })
          .where('id', '=', id).where('version', '=', version).where('key_id', '=', fromKey).executeTakeFirst(),
      );
    },
    /** Record a delivery of `version` during `boot`; a newer version stored meanwhile is left undelivered. */
    async markDelivered(machineId: string, name: string, version: number, boot: string, at: string): Promise<boolean> {
      return one(
        await db.q().updateTable('machine_secrets').set({ delivered_at: at, delivered_version: version, delivered_boot: boot })
          .where('machine_id', '=', machineId).where('name', '=', name).where('version', '=', version).executeTakeFirst(),
      );
    },
    remove: async (machineId: string, name: string): Promise<boolean> =>
      one(await db.q().deleteFrom('machine_secrets').where('machine_id', '=', machineId).where('name', '=', name).executeTakeFirst()),
    removeAllForMachine: async (machineId: string): Promise<number> =>
      changes(await db.q().deleteFrom('machine_secrets').where('machine_id', '=', machineId).executeTakeFirst()).changes,
    all: (): Promise<SecretRow[]> => db.q().selectFrom('machine_secrets').selectAll().orderBy('id', d.asc).execute(),
    keyIds: async (): Promise<Set<string>> =>
      new Set((await db.q().selectFrom('machine_secrets').select('key_id').distinct().execute()).map((r) => r.key_id)),
  };
}
export type SecretsRepo = ReturnType<typeof secretsRepo>;
