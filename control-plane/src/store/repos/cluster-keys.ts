/**
 * Deployment-wide secrets every process shares (version 11's `cluster_keys`): created once by whichever process
 * asks first, insert-if-absent, then read back, so every process of the deployment gets the same bytes. The value
 * never leaves the process that reads it (docs/security.md, "The internal channel's key").
 */
import type { Db } from '../db.js';

/** The key the internal channel between control-plane processes signs with (cluster/forward). */
export const INTERNAL_CHANNEL_KEY = 'internal-channel';

export function clusterKeysRepo(db: Db) {
  return {
    /**
     * The key named `name`; `generate` makes it if no process has yet (its bytes are discarded if another won). One
     * transaction: the insert that finds the name taken waits for the winner's commit, and the read then sees its row.
     */
    getOrCreate(name: string, generate: () => Buffer): Promise<Buffer> {
      return db.tx(async () => {
        await db
          .q()
          .insertInto('cluster_keys')
          .values({ name, key: generate(), created_at: new Date().toISOString() })
          .onConflict((oc) => oc.column('name').doNothing())
          .execute();
        return (await db.q().selectFrom('cluster_keys').select('key').where('name', '=', name).executeTakeFirstOrThrow()).key;
      });
    },
  };
}
