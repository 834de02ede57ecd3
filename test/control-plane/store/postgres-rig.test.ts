/**
 * The throwaway PostgreSQL rig (test/helpers/postgres.ts, issue 24 item 6): a real cluster owned by an
 * unprivileged user, reachable only on its unix socket, gone after stop; a cluster left by a killed test
 * process is swept by the next start.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import pg from 'pg';
import { startPostgres, sweepStaleClusters } from '../../helpers/postgres.js';

t.test('a cluster on a unix socket only, owned by an unprivileged user, removed on stop', async (t) => {
  const server = await startPostgres();
  t.teardown(server.stop);
  t.match(server.url, /^postgres:\/\/postgres@\/computer\?host=%2F/);
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  const row = (await client.query<{ db: string; tcp: string; superuser_owner: string }>(
    `SELECT current_database() AS db, current_setting('listen_addresses') AS tcp,
            (SELECT rolname FROM pg_roles WHERE oid = 10) AS superuser_owner`,
  )).rows[0];
  t.same(row, { db: 'computer', tcp: '', superuser_owner: 'postgres' });
  t.ok(fs.existsSync(path.join(server.dir, '.s.PGSQL.5432')), 'the socket is in the cluster dir');
  if (process.getuid?.() === 0) t.not(fs.statSync(path.join(server.dir, 'data')).uid, 0, 'the data dir is not root\'s');
  const other = await server.createDatabase('second');
  const c2 = new pg.Client({ connectionString: other });
  await c2.connect();
  t.equal((await c2.query<{ db: string }>('SELECT current_database() AS db')).rows[0]!.db, 'second');
  await c2.end();
  await client.end();
  await server.stop();
  t.notOk(fs.existsSync(server.dir), 'stop removes the cluster');
});

t.test('a cluster whose test process was killed is swept', async (t) => {
  // A child process starts a cluster and is killed (-9) before its teardown can run.
  const rig = JSON.stringify(fileURLToPath(new URL('../../helpers/postgres.ts', import.meta.url)));
  const script = `const m = await import(${rig}); const s = await m.startPostgres(); process.stdout.write(s.dir + '\\n'); setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['--import=@tapjs/typescript/import', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = await new Promise<string>((resolve) => child.stdout!.once('data', (b: Buffer) => resolve(b.toString().trim())));
  t.ok(fs.existsSync(path.join(dir, 'data', 'postmaster.pid')), 'the child\'s cluster runs');
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  t.ok(fs.existsSync(dir), 'a killed process leaves its cluster');
  sweepStaleClusters();
  t.notOk(fs.existsSync(dir), 'the sweep stopped and removed it');
});
