/**
 * Machine secrets: sealed values (control-plane/src/secrets/crypto.ts), never plaintext. A row is one
 * name of one machine; replacing it bumps `version`. Delivery is recorded per row as the version and
 * the machine boot (its state_changed_at) it reached, so a stop or restart invalidates it without a write.
 */
import type { Db } from '../db.js';
import { afterSql, type Keyset } from '../pagination.js';

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
  return {
    get: (machineId: string, name: string) =>
      db.get<SecretRow>('SELECT * FROM machine_secrets WHERE machine_id = ? AND name = ?', [machineId, name]),
    forMachine: (machineId: string) => db.all<SecretRow>('SELECT * FROM machine_secrets WHERE machine_id = ? ORDER BY name', [machineId]),
    /** Sealed secrets in the whole database (a missing keyring with any of them is a lost keyring). */
    countAll: async () => (await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM machine_secrets'))!.n,
    /** Count and total value size of a machine's secrets, leaving one name out (the one being replaced). */
    usage: async (machineId: string, except: string) =>
      (await db.get<{ n: number; bytes: number }>(
        'SELECT COUNT(*) AS n, COALESCE(SUM(value_bytes), 0) AS bytes FROM machine_secrets WHERE machine_id = ? AND name <> ?',
        [machineId, except],
      ))!,
    pageOrg: (orgId: string, after: Keyset, limit: number) =>
      db.all<SecretRow>(
        `SELECT * FROM machine_secrets WHERE org_id = @org AND ${afterSql()} ORDER BY created_at, id LIMIT @limit`,
        { org: orgId, ca: after.created_at, cid: after.id, limit },
      ),
    async insert(r: SecretRow): Promise<void> {
      await db.run(
        `INSERT INTO machine_secrets (id, org_id, machine_id, name, version, key_id, sealed, value_bytes, created_at, updated_at,
           delivered_at, delivered_version, delivered_boot)
         VALUES (@id, @org_id, @machine_id, @name, @version, @key_id, @sealed, @value_bytes, @created_at, @updated_at,
           @delivered_at, @delivered_version, @delivered_boot)`,
        { ...r },
      );
    },
    /** Replace the sealed value, compare-and-set on the version that was read. */
    async replace(id: string, fromVersion: number, to: { version: number; key_id: string; sealed: Buffer; value_bytes: number; updated_at: string }): Promise<boolean> {
      return (await db.run(
        'UPDATE machine_secrets SET version = ?, key_id = ?, sealed = ?, value_bytes = ?, updated_at = ? WHERE id = ? AND version = ?',
        [to.version, to.key_id, to.sealed, to.value_bytes, to.updated_at, id, fromVersion],
      )).changes === 1;
    },
    /** Re-seal under another key (rotation): same version, compare-and-set on the old key id. */
    async reseal(id: string, version: number, fromKey: string, to: { key_id: string; sealed: Buffer }): Promise<boolean> {
      return (await db.run('UPDATE machine_secrets SET key_id = ?, sealed = ? WHERE id = ? AND version = ? AND key_id = ?', [
        to.key_id, to.sealed, id, version, fromKey,
      ])).changes === 1;
    },
    /** Record a delivery of `version` during `boot`; a newer version stored meanwhile is left undelivered. */
    async markDelivered(machineId: string, name: string, version: number, boot: string, at: string): Promise<boolean> {
      return (await db.run(
        'UPDATE machine_secrets SET delivered_at = ?, delivered_version = ?, delivered_boot = ? WHERE machine_id = ? AND name = ? AND version = ?',
        [at, version, boot, machineId, name, version],
      )).changes === 1;
    },
    remove: async (machineId: string, name: string) =>
      (await db.run('DELETE FROM machine_secrets WHERE machine_id = ? AND name = ?', [machineId, name])).changes === 1,
    removeAllForMachine: async (machineId: string) => (await db.run('DELETE FROM machine_secrets WHERE machine_id = ?', [machineId])).changes,
    all: () => db.all<SecretRow>('SELECT * FROM machine_secrets ORDER BY id'),
    keyIds: async () => new Set((await db.all<{ key_id: string }>('SELECT DISTINCT key_id FROM machine_secrets')).map((r) => r.key_id)),
  };
}
export type SecretsRepo = ReturnType<typeof secretsRepo>;
