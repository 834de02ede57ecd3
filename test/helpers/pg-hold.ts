/**
 * Makes a race certain instead of likely, with PostgreSQL's own locks: `holdWrites` takes `LOCK TABLE … IN SHARE
 * MODE` on a table from a connection of the test's own, so every transaction that reads it goes on and every one
 * that writes it stops at its write. The test waits until the racing transactions all wait on a lock (a condition on
 * pg_stat_activity, never a clock), then releases them: without serialization before the read, all of them read the
 * same state and then write.
 */
import pg from 'pg';

export interface Hold {
  /** Resolves once `n` other backends of this database wait on a lock (for the held table or anything else). */
  waiting(n: number): Promise<void>;
  release(): Promise<void>;
}

export async function holdWrites(url: string, table: string): Promise<Hold> {
  return holding(url, (client) => client.query(`LOCK TABLE ${client.escapeIdentifier(table)} IN SHARE MODE`));
}

/**
 * Holds one row (`SELECT … FOR UPDATE` where `column` = `value`): reads go on, and every write of that row queues on
 * it in the order the writers arrive (PostgreSQL's tuple lock), so once released they write in that order.
 */
export async function holdRow(url: string, table: string, column: string, value: string): Promise<Hold> {
  return holding(url, (client) => client.query(`SELECT 1 FROM ${client.escapeIdentifier(table)} WHERE ${client.escapeIdentifier(column)} = $1 FOR UPDATE`, [value]));
}

async function holding(url: string, take: (client: pg.Client) => Promise<unknown>): Promise<Hold> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('BEGIN');
  await take(client);
  let released = false;
  return {
    async waiting(n) {
      for (;;) {
        // This connection is inside its transaction, whose statistics snapshot would stay as it first saw them.
        await client.query('SELECT pg_stat_clear_snapshot()');
        const r = await client.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`,
        );
        if (r.rows[0]!.n >= n) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async release() {
      if (released) return;
      released = true;
      await client.query('COMMIT');
      await client.end();
    },
  };
}
