/**
 * End to end through /v1 with the vm substrate (QEMU; TCG on hosts without usable KVM, so ONE machine
 * and generous waits): create → running → display up → screenshot → lease-gated input → exec →
 * stop/start keeps the disk → delete. The catalog's small size is shrunk so a TCG guest fits the host.
 * The same boots prove the machine its own identity (issue 26 item 1, test/helpers/vm-identity.ts): valid and as
 * the driver recorded it, and back to that after guest root rewrote the files and the machine stopped and started.
 * Then the substrate watch's drill on the same machine (issue 14 item 2, docs/operations.md): QEMU killed from
 * outside (SIGKILL: its pid file stays) → `error` with `machine.failed`, and start works; the guest powering itself
 * off (init's shutdown ends in a sysrq power-off, QEMU exits and removes its pid file) → `stopped` with
 * `machine.stopped {reason: guest_shutdown}`.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { vmFiles } from '../../control-plane/src/substrate/vm/argv.js';
import { agentAnswers, eventsOf, machineState } from '../helpers/faults.js';
import type { MachinesRig } from '../helpers/machines-rig.js';
import { vmMachinesRig } from '../helpers/substrate-rigs.js';
import { assertOwnIdentity, rootSh, TAMPER_IDENTITY } from '../helpers/vm-identity.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

async function until<T>(what: string, ms: number, fn: () => Promise<T | null>): Promise<T> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await fn();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`gave up waiting for ${what}`);
}

const ok200 = (rig: MachinesRig, key: string, method: string, p: string, body?: unknown) => async () => {
  const r = await rig.call(method, p, { key, body });
  if (r.status === 200) return r;
  if (r.status === 503) return null;
  throw new Error(`${p}: ${r.status} ${r.text}`);
};

t.test('machines API end to end on the vm substrate', { timeout: 1_500_000 }, async (t) => {
  const { rig, substrate: sub, root, created } = await vmMachinesRig(t);

  const a = await rig.tenant('developer');
  const create = await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'vm-e2e' } });
  t.equal(create.status, 201, 'created');
  created.push(create.json.id);
  t.equal(create.json.state, 'running', 'returns once running');
  const base = `/v1/machines/${create.json.id}`;

  const display = await until('the desktop', 300_000, ok200(rig, a.key, 'GET', `${base}/display`));
  t.match(display.json, { up: true }, 'the desktop came up');
  const shot = await rig.call('GET', `${base}/screenshot?format=png`, { key: a.key });
  t.same([...Buffer.from(shot.json.image, 'base64').subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], 'a PNG frame through /v1');

  const s = (await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: create.json.id, type: 'agent' } })).json.id;
  t.equal((await rig.call('POST', `${base}/mouse/move`, { key: a.key, body: { x: 5, y: 5 }, headers: { 'x-session-id': s } })).status, 409, 'input without the lease');
  const fence = (await rig.call('POST', `${base}/input-lease`, { key: a.key, body: { session_id: s } })).json.fence;
  const moved = await rig.call('POST', `${base}/mouse/move`, { key: a.key, body: { x: 5, y: 5 }, headers: { 'x-session-id': s, 'x-lease-fence': String(fence) } });
  t.equal(moved.status, 200, 'input with the lease');
  t.same(moved.json.pointer, { x: 5, y: 5 });

  const ex = await rig.call('POST', `${base}/exec`, { key: a.key, body: { command: ['sh', '-c', 'id -un > /home/agent/who && cat /home/agent/who && sync'] } });
  t.equal(ex.json.stdout, 'agent\n', 'exec as the agent user');
  const denied = await rig.call('GET', `${base}/files/content?path=${encodeURIComponent('/sys/firmware/qemu_fw_cfg/by_name/opt/computer/token/raw')}`, { key: a.key });
  t.equal(denied.status, 403, 'fw_cfg is denied through /v1');
  const identity = await assertOwnIdentity(t, rig, root, a.key, create.json.id, 'a created machine');
  await rootSh(rig, a.key, create.json.id, TAMPER_IDENTITY);

  t.equal((await rig.call('POST', `${base}/stop`, { key: a.key })).json.state, 'stopped');
  t.equal((await rig.call('POST', `${base}/start`, { key: a.key })).json.state, 'running');
  const again = await until('the agent after start', 300_000, ok200(rig, a.key, 'POST', `${base}/exec`, { command: ['cat', '/home/agent/who'] }));
  t.equal(again.json.stdout, 'agent\n', 'the disk survived stop/start');
  t.same(await assertOwnIdentity(t, rig, root, a.key, create.json.id, 'started again'), identity, 'a stop and start over rewritten files boots with its own identity again');

  // The watch's drill (was test/faults/vm-exits.test.ts, which booted a machine of its own for it).
  const id = create.json.id as string;
  const stopWatch = rig.services.machines.startWatch();
  t.teardown(stopWatch);
  const pidFile = vmFiles(path.join(root, 'machines', id)).pidFile;
  process.kill(Number(fs.readFileSync(pidFile, 'utf8').trim()), 'SIGKILL');
  t.equal(await machineState(rig, a.key, id, ['error', 'stopped']), 'error', 'a killed VM is in error');
  t.match((await eventsOf(rig, a.key, id)).at(-1), { type: 'machine.failed', data: { operation: 'run', reason: 'exited' } });
  const restarted = await rig.call('POST', `${base}/start`, { key: a.key });
  t.equal(restarted.status, 200, restarted.text);
  await agentAnswers(rig, a.key, id, 600);
  // The guest ends itself: its init's shutdown (TERM to PID 1's child) syncs and powers off.
  await rig.call('POST', `${base}/exec`, { key: a.key, body: { command: ['sh', '-c', 'kill -TERM 1'], user: 'root' } });
  t.equal(await machineState(rig, a.key, id, ['error', 'stopped'], 240), 'stopped', 'a guest power-off is a stop');
  t.match((await eventsOf(rig, a.key, id)).filter((e) => e.type === 'machine.stopped').at(-1), { data: { reason: 'guest_shutdown' } });
  t.notOk(fs.existsSync(pidFile), 'QEMU removed its pid file');

  t.equal((await rig.call('DELETE', base, { key: a.key })).status, 204);
  t.equal(await sub.status(create.json.id), 'absent');
  const token = (await rig.store.db.q().selectFrom('machines').select('agent_token').where('id', '=', create.json.id).executeTakeFirstOrThrow()).agent_token;
  t.notOk(rig.bodies.join('\n').includes(token), 'no response carried the guest token');
});
