/**
 * Issue 25's drill ("Done means"): three host processes, each `serve()` as `npm start` runs it (served-child.ts
 * with `containers`: the real container substrate in its own DATA_DIR, so its own btrfs volume, bridge and subnet,
 * prepared and deferred as main.ts has it), one PostgreSQL. Hosts A, B, C in regions ra, rb, rc, each pinned to
 * 20 GiB (room for four small machines: 0.9 × 20480 MiB / 4096 MiB).
 *
 * 1. Six creates, all arriving at A, spread two per host.
 * 2. Every route and channel through whichever process: exec through all three, a screenshot and the screen channel
 *    (WebSocket) through processes that do not drive the machine.
 * 3. A file written on a machine of A, snapshotted there, forked with `region: rb`: the fork runs on B and holds the file
 *    (its layers pulled from A over the internal channel).
 * 4. kill -9 of C's process: its machines `error` (`machine.failed host_lost`) while A's and B's keep answering; C
 *    restarted on its DATA_DIR: its machines `stopped` once, each startable and answering, failed once.
 * 5. `computer-admin hosts drain` of A: its machines move (stopped, captured, pulled, made, started), the one that ran
 *    runs elsewhere with the file, A ends empty.
 * Needs root, podman, runc and btrfs-progs (as every container test).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { runAdmin } from '../../../control-plane/src/admin/computer-admin.js';
import { openStoreDb } from '../../../control-plane/src/store/engine/open.js';
import { ContainerSubstrate } from '../../../control-plane/src/substrate/container/driver.js';
import { open } from '../../helpers/gateway-ws.js';
import { childGroup, type ChildLine, type PgChild } from '../../helpers/pg-processes.js';
import { startPostgres } from '../../helpers/postgres.js';
import { callServed as call, tenantVia, type HttpReply } from '../../helpers/served-processes.js';
import { testImage } from '../../helpers/substrate-image.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../helpers/served-child.ts');
const GIB = 1024 ** 3;
const SHAPE = { cores: 16, memory_bytes: 20 * GIB, disk_bytes: 1000 * GIB };
const HOSTS = ['A', 'B', 'C'] as const;
type HostName = (typeof HOSTS)[number];
const REGION: Record<HostName, string> = { A: 'ra', B: 'rb', C: 'rc' };
const FILE = '/home/agent/drill/note.txt';
const TEXT = 'written on host A before its snapshot and its drain\n';

const ok = (t: Test, r: HttpReply, status: number, what: string): HttpReply => {
  t.equal(r.status, status, what, { answer: r.json });
  return r;
};
const ready = (l: ChildLine) => l.ready === true;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('three hosts on real containers: spread, any process, a fork across hosts, a host lost and back, a drain', async (t) => {
  const pg = await startPostgres();
  t.teardown(() => pg.stop());
  const url = await pg.createDatabase('three_hosts');
  const db = await openStoreDb({ databaseUrl: url, dataDir: '/nonexistent' });
  const dirs = Object.fromEntries(HOSTS.map((h) => [h, fs.mkdtempSync(path.join(os.tmpdir(), `three-hosts-${h}-`))])) as Record<HostName, string>;
  const made: string[] = [];
  // Last: whatever containers the drill left (a failed check stops it midway) go with their roots.
  t.teardown(async () => {
    await db.close();
    const image = await testImage('container');
    for (const h of HOSTS) {
      const s = new ContainerSubstrate({ root: path.join(dirs[h], 'substrate'), baseRootfs: image.rootfs, stopTimeoutMs: 2000 });
      const known = await s.reattach().catch(() => []);
      for (const id of new Set([...made, ...known.map((k) => k.id)])) await s.destroy(id).catch(() => {});
      await s.releaseMounts().catch(() => {});
      fs.rmSync(dirs[h], { recursive: true, force: true });
    }
  });
  const start = childGroup(t, { url, containers: true }, CHILD);
  const procs = {} as Record<HostName, PgChild>;
  const base = {} as Record<HostName, string>;
  const launch = async (h: HostName, name: string) => {
    procs[h] = start(name, { dataDir: dirs[h], region: REGION[h], hostShape: SHAPE });
    base[h] = String((await procs[h].next(ready)).base);
  };
  for (const h of HOSTS) await launch(h, h.toLowerCase());

  const hostRows = await db.q().selectFrom('hosts').select(['id', 'region']).execute();
  const nameOf = new Map(hostRows.map((r) => [r.id, HOSTS.find((h) => REGION[h] === r.region)!]));
  const idOf = (h: HostName) => [...nameOf].find(([, n]) => n === h)![0];
  const hostOf = async (id: string) => nameOf.get((await db.q().selectFrom('machines').select('host_id').where('id', '=', id).executeTakeFirstOrThrow()).host_id!);
  const onHost = async (h: HostName) => (await db.q().selectFrom('machines').select('id').where('host_id', '=', idOf(h)).where('deleted_at', 'is', null).execute()).map((r) => r.id);

  const tn = await tenantVia(base.A, 'pro', 1);
  const { key, cookie } = tn;
  const state = async (id: string, at: string = base.A) => (await call(at, 'GET', `/v1/machines/${id}`, { key })).json.state as string;
  const waitState = async (id: string, want: string, at: string = base.A) => {
    while ((await state(id, at)) !== want) await sleep(200);
  };
  // A machine just started answers once its agent is up: until then `compute_unavailable` (503), retried (bounded).
  const reachable = async (send: () => Promise<HttpReply>): Promise<HttpReply> => {
    for (let i = 0; ; i++) {
      const r = await send();
      if (r.status !== 503 || i >= 300) return r;
      await sleep(200);
    }
  };
  const exec = (at: string, id: string, command: string[]) => reachable(() => call(at, 'POST', `/v1/machines/${id}/exec`, { key, body: { command } }));
  const readFile = (at: string, id: string) => reachable(() => call(at, 'GET', `/v1/machines/${id}/files/content?path=${encodeURIComponent(FILE)}`, { key }));

  // 1. Six creates, all through A: two per host.
  const byHost: Record<HostName, string[]> = { A: [], B: [], C: [] };
  for (let i = 0; i < 6; i++) {
    const r = ok(t, await call(base.A, 'POST', '/v1/machines', { key, body: { name: `m-${i}` } }), 201, `create m-${i}`);
    made.push(r.json.id);
    byHost[(await hostOf(r.json.id))!].push(r.json.id);
  }
  t.same(HOSTS.map((h) => byHost[h].length), [2, 2, 2], 'six machines spread two per host');

  // 2. Every machine answers through every process; a screenshot and the screen channel through non-drivers.
  for (const h of HOSTS) {
    for (const id of byHost[h]) {
      for (const at of HOSTS) {
        const r = ok(t, await exec(base[at], id, ['cat', '/etc/hostname']), 200, `exec on a machine of ${h} through ${at}`);
        t.equal(r.json.exit_code, 0);
      }
    }
    const other = HOSTS[(HOSTS.indexOf(h) + 1) % 3]!;
    const shot = ok(t, await call(base[other], 'GET', `/v1/machines/${byHost[h][0]}/screenshot?format=png`, { key }), 200, `a screenshot of a machine of ${h} through ${other}`);
    t.same([...Buffer.from(String(shot.json.image), 'base64').subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], 'a PNG');
    const ws = await open(`${base[other].replace('http', 'ws')}/v1/machines/${byHost[h][0]}/screen`, { authorization: `Bearer ${key}` });
    await ws.waitFor(() => ws.binaries.length > 0, 'a frame', 60_000);
    t.ok(ws.binaries[0]!.length > 0, `the screen channel of a machine of ${h} through ${other} carries frames`);
    ws.ws.close();
  }

  // 3. A file on a machine of A, its snapshot (taken on A), forked into region rb: the fork runs on B with the file.
  const [a1, a2] = byHost.A as [string, string];
  ok(t, await call(base.C, 'PUT', `/v1/machines/${a1}/files/content?path=${encodeURIComponent(FILE)}`, { key, body: { content: TEXT } }), 200, 'a file written through C');
  ok(t, await exec(base.B, a1, ['sync']), 200, 'synced');
  const snap = ok(t, await call(base.B, 'POST', '/v1/snapshots?wait=true', { cookie, body: { machine_id: a1, name: 'on-a' } }), 201, 'snapshot, taken on A');
  const fork = ok(t, await call(base.C, 'POST', `/v1/machines/${a1}/fork`, { key, body: { snapshot_id: snap.json.id, region: 'rb', name: 'fork-on-b' } }), 201, 'fork into rb, through C');
  made.push(fork.json.id);
  t.equal(await hostOf(fork.json.id), 'B', 'the fork runs on B');
  t.equal(ok(t, await readFile(base.A, fork.json.id), 200, "the fork's file, read through A").json.content, TEXT, "the snapshot's file, on B");

  // 4. kill -9 of C's process: its machines error, A's and B's keep answering; C back: stopped once, startable.
  const killedAt = Date.now();
  await procs.C.kill9();
  for (const id of [...byHost.A, ...byHost.B]) ok(t, await exec(base.B, id, ['true']), 200, 'a machine of A or B answers while C is lost');
  for (const id of byHost.C) await waitState(id, 'error');
  t.comment(`kill -9 of host C's process → its machines error: ${Date.now() - killedAt} ms (docs/operations.md: within 10 s)`);
  for (const id of byHost.C) {
    const ev = ok(t, await call(base.A, 'GET', `/v1/machines/${id}/events?limit=20`, { key }), 200, 'events').json.data as Array<{ type: string; data: Record<string, unknown> }>;
    t.same(ev.slice(0, 2).map((e) => [e.type, e.data.reason]), [['machine.failed', 'host_lost'], ['host.unhealthy', 'host_lost']], 'failed with its host');
  }
  await launch('C', 'c2');
  t.match(await procs.C.next((l) => l.log === 'host.returned', 0), { stopped: 2, still_error: 0 }, 'C back: both machines stopped, their disks are there');
  for (const id of byHost.C) {
    t.equal(await state(id, base.B), 'stopped', 'honest through another process');
    ok(t, await call(base.B, 'POST', `/v1/machines/${id}/start`, { key }), 200, 'starts through B');
    ok(t, await exec(base.A, id, ['true']), 200, 'answers through A');
    // Lifecycle events only (machine.ready follows each boot once the desktop answers).
    const types = (ok(t, await call(base.A, 'GET', `/v1/machines/${id}/events?limit=20`, { key }), 200, 'events').json.data as Array<{ type: string; data: { reason?: string } }>)
      .filter((e) => e.type !== 'machine.ready')
      .map((e) => (e.data.reason ? `${e.type} ${e.data.reason}` : e.type));
    t.same(types, ['machine.started', 'machine.stopped host_returned', 'machine.failed host_lost', 'host.unhealthy host_lost', 'machine.started', 'machine.created'], 'failed once, stopped once, started again: nothing acted twice');
  }

  // 5. Drain A: its machines move; the one with the file runs elsewhere with it; A ends empty.
  const out: string[] = [];
  const err: string[] = [];
  const code = await runAdmin(['hosts', 'drain', idOf('A')], { env: { DATABASE_URL: url }, out: (l) => out.push(l), err: (l) => err.push(l), pollMs: 250 });
  t.equal(code, 0, `drained: ${[...out, ...err].join('\n')}`);
  t.comment(out.join('\n'));
  t.same(await onHost('A'), [], 'A is empty');
  const movedTo = await hostOf(a1);
  t.not(movedTo, 'A', `the machine with the file moved (to ${movedTo})`);
  await waitState(a1, 'running');
  t.equal(ok(t, await readFile(base.A, a1), 200, 'its file, read through A').json.content, TEXT, 'the file written before the drain is there after it');
  t.equal(await state(a2), 'running', 'the other machine of A runs again too');
});
