/**
 * How many statements a machine create costs on PostgreSQL (issue 24: create → running PG − SQLite ≤ +10 ms p50;
 * what PostgreSQL pays and SQLite does not is a round trip per statement). Counted on PostgreSQL's side, not by the
 * code under test: the test's database logs every statement (`ALTER DATABASE … SET log_statement = 'all'`), and
 * the lines of the cluster's log between two markers — sent on a connection of the test's own, its backend's pid
 * left out — are the create's. The rig is the machines API over the fake substrate (the real agent app behind each
 * channel), as the store bench (scripts/bench/store.ts) measures it, on a registered host; without `serve()`'s routing,
 * whose placement read and host row (2 more) come before the handler.
 *
 * 26 at first (2026-11-27): the key and its creator's membership (2); the admission transaction (14: BEGIN, the
 * organization's lock, billing_accounts twice, entitlement_overrides, the machines and running counts, the trial's
 * usage sum, the host's lock, the placement re-check, the name, the insert, the event, COMMIT); the outcome
 * transaction (7: BEGIN, the fenced state update, the meter cursor read, the machine read, the cursor insert, the
 * event, COMMIT); the secrets' redelivery after the boot (2, not awaited: the boot's row, the machine's secrets); the
 * answer's read (1). 18 since the cuts listed in docs/operations.md ("Fewer round trips, counted"): the key 1, the
 * admission 10, the outcome 5 (BEGIN, the fenced update, the cursor claim, the event, COMMIT), the redelivery's 2.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import t from 'tap';
import { registeredUrl } from '../../../control-plane/src/cluster/owner-of.js';
import { fakeSubstrateWithAgents } from '../../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../../helpers/machines-rig.js';
import { startPostgres } from '../../helpers/postgres.js';

const HOST = 'host_counted';
const CAPACITY = { cores: 64, memory_bytes: 256 * 1024 ** 3, disk_bytes: 1024 ** 4, machines: { small: 64 } };

/**
 * One statement's line (the default log_line_prefix, `%m [%p] `): `… UTC [pid] LOG:  statement: …` for the simple
 * protocol, `… LOG:  execute <unnamed>: …` for a parameterized one (its `DETAIL:  parameters: …` line is not counted).
 */
const STATEMENT = /^\S+ \S+ \S+ \[(\d+)\] LOG:  (?:statement|execute [^:]*): (.*)$/;

/**
 * The rig's pool connections checked out in this process (from `connect()`, answered or not yet, to `release()`):
 * `drained()` resolves once there are none, so every statement sent so far has its answer, and a statement is
 * logged before it runs. A store call that is not awaited (the secrets' redelivery after a boot looks for any to
 * send) counts from the moment it asks the pool. Watches, counts nothing: the count is the log's.
 */
function poolCheckouts() {
  let n = 0;
  const original = pg.Pool.prototype.connect;
  const connect: (this: pg.Pool) => Promise<pg.PoolClient> = original;
  async function tracked(this: pg.Pool): Promise<pg.PoolClient> {
    n++;
    let client: pg.PoolClient;
    try {
      client = await connect.call(this);
    } catch (e) {
      n--;
      throw e;
    }
    const release = client.release;
    client.release = (err?: Error | boolean) => {
      n--;
      client.release = release;
      release.call(client, err);
    };
    return client;
  }
  pg.Pool.prototype.connect = tracked as typeof original;
  return {
    restore: () => {
      pg.Pool.prototype.connect = original;
    },
    async drained(): Promise<void> {
      while (n > 0) await new Promise((r) => setImmediate(r));
    },
  };
}

t.test('a POST /v1/machines with body {} on the fake substrate, from request to its 201 running answer, is a pinned number of statements', async (t) => {
  const cluster = await startPostgres();
  t.teardown(cluster.stop);
  const url = await cluster.createDatabase('counted');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`ALTER DATABASE counted SET log_statement = 'all'`);
  await admin.end();
  // Connected after the ALTER: a session takes the database's settings when it starts.
  const marker = new pg.Client({ connectionString: url });
  await marker.connect();
  t.teardown(() => marker.end());
  const markerPid = (await marker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;

  const inFlight = poolCheckouts();
  t.teardown(inFlight.restore);
  const fake = fakeSubstrateWithAgents();
  // A registered host, as `serve()` on PostgreSQL drives: the admission locks its row and re-checks the fit there. No
  // readiness probe: it runs beside the answer (machine.ready), not in it, and would race the end marker.
  // The key read every time (AUTH_CACHE_MS 0): remembered (services/key-cache.ts, 1 s by default on PostgreSQL) a busy
  // caller's create is one statement fewer, which timing would decide here.
  const rig = await makeMachinesRig({ substrate: fake.substrate, databaseUrl: url, env: { AUTH_CACHE_MS: '0' }, services: { hostId: HOST, readyProbe: false } });
  t.teardown(async () => {
    fake.close();
    await rig.close();
  });
  await rig.store.hosts.takeOver({ id: HOST, region: 'default', capacity: CAPACITY, internalUrl: registeredUrl('127.0.0.1:1', 'proc_counted') });
  const a = await rig.tenant('pro');
  // One create first: the pool's connections are open (each logs its own session setup) and every lazy read is done.
  const warm = await rig.call('POST', '/v1/machines', { key: a.key, body: {} });
  t.equal(warm.status, 201);

  const log = path.join(cluster.dir, 'log');
  await inFlight.drained();
  await marker.query(`SELECT 'create-statements begin'`);
  const created = await rig.call('POST', '/v1/machines', { key: a.key, body: {} });
  // A create also starts reads it does not wait for: they count, and are in the log once their connections are back.
  await inFlight.drained();
  await marker.query(`SELECT 'create-statements end'`);
  t.equal(created.status, 201);
  t.equal(created.json.state, 'running', 'answered once running');

  const lines = fs.readFileSync(log, 'utf8').split('\n');
  const begin = lines.findIndex((l) => l.endsWith(`SELECT 'create-statements begin'`));
  const end = lines.findIndex((l) => l.endsWith(`SELECT 'create-statements end'`));
  t.ok(begin >= 0 && end > begin, 'both markers are in the log');
  const statements = lines
    .slice(begin + 1, end)
    .map((l) => STATEMENT.exec(l))
    .filter((m): m is RegExpExecArray => m !== null && Number(m[1]) !== markerPid)
    .map((m) => m[2]!);
  t.comment(statements.map((s, i) => `${i + 1}. ${s.slice(0, 160)}`).join('\n'));
  t.equal(statements.length, 18, 'the create is 18 statements on PostgreSQL');
});
