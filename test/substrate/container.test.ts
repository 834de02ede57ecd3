/**
 * Integration, container substrate (real podman, real overlayfs, the real guest image and agent).
 * Needs root, podman, runc; the image is built on first use.
 */
import t from 'tap';
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { isMounted } from '../../control-plane/src/substrate/disks/overlay-backend.js';
import { globalArgs, podmanEnv } from '../../control-plane/src/substrate/container/podman-argv.js';
import { testImage, waitForAgent } from '../helpers/substrate-image.js';
import { H2Client } from '../helpers/h2-client.js';

const res = { vcpu: 1, memory_mb: 1024, disk_gb: 2 };
const READY_MS = 120_000;

async function exec(c: H2Client, command: string[]): Promise<{ stdout: string; stderr: string; exit_code: number }> {
  const r = await c.request('POST', '/exec', { command });
  if (r.status !== 200) throw new Error(`exec status ${r.status}: ${r.body.toString()}`);
  return r.json();
}


// Longer than the suite's per-file timeout: a first run builds the image (~2 min).
t.setTimeout(900_000);
t.test('container substrate end to end', { timeout: 900_000 }, async (t) => {
  const image = await testImage('container');
  // Short root: unix socket paths are limited to 107 bytes.
  const root = fs.mkdtempSync('/tmp/cs-');
  const sub = new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000 });
  const clients: H2Client[] = [];
  const ids = ['mch_ct1', 'mch_ct2'];
  t.teardown(async () => {
    for (const c of clients) c.session.destroy();
    for (const id of ids) await sub.destroy(id).catch(() => {});
    await sub.releaseMounts();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(sub.env.runDir!, { recursive: true, force: true });
  });
  const token1 = crypto.randomBytes(24).toString('hex');
  const token2 = crypto.randomBytes(24).toString('hex');

  // setup-host.sh installs btrfs-progs: disks live on a loop-mounted btrfs volume and live captures snapshot.
  t.equal(sub.diskMode, 'snapshot');
  t.equal(await sub.status('mch_ct1'), 'absent');
  await sub.create({ id: 'mch_ct1', resources: res, source: { kind: 'base' } });
  t.equal(await sub.status('mch_ct1'), 'running');
  const chanDir = path.dirname(sub.channelPath('mch_ct1'));
  t.equal(fs.statSync(chanDir).mode & 0o777, 0o700, 'channel dir is 0700');
  t.same(fs.readdirSync(chanDir).filter((f) => f !== 'agent.sock'), [], 'no credential is stored for the guest at create');

  const a1 = await waitForAgent(sub, 'mch_ct1', token1, READY_MS);
  clients.push(a1.client);
  t.equal(a1.health.ok, true, 'agent ready through the channel');
  const wrong = new H2Client(sub.channelPath('mch_ct1'), 'wrong-token-wrong-token');
  clients.push(wrong);
  t.equal((await wrong.request('GET', '/health')).status, 401, 'a wrong token is refused');

  const shot = await a1.client.request('GET', '/screenshot?format=png');
  t.equal(shot.status, 200, 'screenshot');
  const png = Buffer.from(shot.json().image, 'base64');
  t.same([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG frame');
  t.equal(shot.json().display.width, 1280, 'default mode 1280x800');
  t.equal(shot.json().display.height, 800);

  const who = await exec(a1.client, ['sh', '-c', 'id -un; cat /etc/os-release | grep VERSION_CODENAME']);
  t.equal(who.exit_code, 0);
  t.match(who.stdout, /^agent\n/, 'exec runs as the agent user');
  t.match(who.stdout, /VERSION_CODENAME=bookworm/);

  // The machine's memory is read from its own cgroup: 64 MiB written to the guest's /tmp (tmpfs) shows up in it
  // (at least half of it: the kernel's per-CPU counters are folded into memory.stat lazily).
  const m0 = sub.memory('mch_ct1');
  t.ok(m0 && m0.pids.length >= 3, 'memory of a running machine, with its processes');
  t.equal((await exec(a1.client, ['sh', '-c', 'head -c 67108864 /dev/zero > /tmp/ballast'])).exit_code, 0);
  const m1 = sub.memory('mch_ct1');
  const MiB = 1024 * 1024;
  t.ok(m0 && m1 && m1.shmemBytes - m0.shmemBytes >= 32 * MiB, `tmpfs pages are charged to the machine (+${m0 && m1 ? ((m1.shmemBytes - m0.shmemBytes) / MiB).toFixed(1) : '?'} MiB shmem)`);
  t.ok(m0 && m1 && m1.workingSetBytes - m0.workingSetBytes >= 32 * MiB, `and counted in what it holds (+${m0 && m1 ? ((m1.workingSetBytes - m0.workingSetBytes) / MiB).toFixed(1) : '?'} MiB)`);
  await exec(a1.client, ['rm', '/tmp/ballast']);
  t.equal(sub.memory('mch_nope'), null, 'no memory for a machine that does not exist');

  // What keeps the idle machine small (docs/guest-image.md, "Memory"): Xvfb without GLX; the agent and its
  // files worker (started by a files call) with V8's young generation capped and glibc's arenas limited.
  const glx = await exec(a1.client, ['sh', '-c', 'DISPLAY=:0 xdpyinfo -queryExtensions | grep -c GLX || true']);
  t.equal(glx.stdout.trim(), '0', 'Xvfb runs without GLX');
  t.equal((await a1.client.request('GET', '/files?path=%2Fhome%2Fagent')).status, 200);
  const guestProcs = (sub.memory('mch_ct1')?.pids ?? []).flatMap((pid) => {
    try {
      const split = (f: string) => fs.readFileSync(`/proc/${pid}/${f}`, 'utf8').split('\0').filter(Boolean);
      return [{ argv: split('cmdline'), env: split('environ') }];
    } catch {
      return [];
    }
  });
  for (const script of ['/dist/agent/src/main.js', '/dist/agent/src/files/worker.js']) {
    const p = guestProcs.find((g) => g.argv.some((a) => a.endsWith(script)));
    t.same(p?.argv.filter((a) => a.startsWith('--max-semi-space-size')), ['--max-semi-space-size=1'], `${script}: V8 flags`);
    t.same(p?.env.filter((e) => e.startsWith('MALLOC_')).sort(), ['MALLOC_ARENA_MAX=2'], `${script}: glibc malloc settings`);
  }

  // Chromium works for the agent user (without its sandbox in a container)
  const open = await a1.client.request('POST', '/browser/open', { url: 'about:blank' });
  t.equal(open.status, 200, 'browser open');
  let win = { stdout: '', stderr: '', exit_code: 1 };
  for (let i = 0; i < 150 && win.exit_code !== 0; i++) {
    win = await exec(a1.client, ['sh', '-c', 'DISPLAY=:0 xdotool search --onlyvisible --class chromium']);
    if (win.exit_code !== 0) await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(win.exit_code, 0, 'a chromium window is on the display');
  const procs = await exec(a1.client, ['sh', '-c', 'ps -C chromium -o user= | sort -u']);
  t.equal(procs.stdout.trim(), 'agent', 'chromium runs as the agent user');

  const content = `captured ${crypto.randomBytes(8).toString('hex')}`;
  const w = await exec(a1.client, ['sh', '-c', `printf '%s' '${content}' > /home/agent/note.txt`]);
  t.equal(w.exit_code, 0, 'wrote a file');

  const cap = await sub.capture('mch_ct1', 'snap1');
  t.equal(cap.live, true, 'captured while running');
  t.equal(await sub.status('mch_ct1'), 'running', 'still running after the capture');
  t.ok(cap.bytes > 0);
  const after = await exec(a1.client, ['cat', '/home/agent/note.txt']);
  t.equal(after.stdout, content, 'machine keeps working after capture');
  // written after the capture: must not appear in the fork
  await exec(a1.client, ['sh', '-c', 'echo later > /home/agent/later.txt']);

  await sub.create({ id: 'mch_ct2', resources: res, source: { kind: 'layer', layerId: cap.layerId } });
  const a2 = await waitForAgent(sub, 'mch_ct2', token2, READY_MS);
  clients.push(a2.client);
  t.equal((await exec(a2.client, ['cat', '/home/agent/note.txt'])).stdout, content, 'fork reads the captured file');
  t.not((await exec(a2.client, ['test', '-e', '/home/agent/later.txt'])).exit_code, 0, 'fork does not see later writes');
  const r1 = await a1.client.request('GET', '/health');
  t.equal(r1.status, 200, 'the first machine is unaffected by the fork');
  const cross = new H2Client(sub.channelPath('mch_ct2'), token1);
  clients.push(cross);
  t.equal((await cross.request('GET', '/health')).status, 401, "one machine's token does not open another's agent");

  // stop/start keeps the disk
  a1.client.session.destroy();
  await sub.stop('mch_ct1');
  t.equal(await sub.status('mch_ct1'), 'stopped');
  t.equal(sub.memory('mch_ct1'), null, 'no memory for a stopped machine');
  t.notOk(isMounted(sub.mergedPath('mch_ct1')), 'overlay unmounted while stopped');
  await sub.start('mch_ct1');
  const a1b = await waitForAgent(sub, 'mch_ct1', token1, READY_MS);
  clients.push(a1b.client);
  t.equal((await exec(a1b.client, ['cat', '/home/agent/note.txt'])).stdout, content, 'file survives stop/start');
  t.equal((await exec(a1b.client, ['cat', '/home/agent/later.txt'])).stdout, 'later\n');

  // re-attach as a restarted control plane would
  const sub2 = new ContainerSubstrate({ root, baseRootfs: image.rootfs });
  const seen = await sub2.reattach();
  t.same(
    seen.sort((a, b) => a.id.localeCompare(b.id)),
    [
      { id: 'mch_ct1', status: 'running' },
      { id: 'mch_ct2', status: 'running' },
    ],
  );

  // capture while stopped (the writable dir becomes the layer), then restore the first snapshot
  a1b.client.session.destroy();
  await sub.stop('mch_ct1');
  const cap2 = await sub.capture('mch_ct1', 'snap2');
  t.equal(cap2.live, false);
  t.same((await sub.diskUsage('mch_ct1')).chain, [cap2.layerId], 'stopped capture freezes in place');
  await sub.replaceDisk('mch_ct1', { kind: 'layer', layerId: cap.layerId });
  t.same((await sub.diskUsage('mch_ct1')).chain, [cap.layerId], 'restored onto the first capture');
  await sub.start('mch_ct1');
  const a1c = await waitForAgent(sub, 'mch_ct1', token1, READY_MS);
  clients.push(a1c.client);
  t.equal((await exec(a1c.client, ['cat', '/home/agent/note.txt'])).stdout, content, 'restored disk has the captured file');
  t.not((await exec(a1c.client, ['test', '-e', '/home/agent/later.txt'])).exit_code, 0, 'and not what was written after it');

  // destroy frees what nothing else references
  const blobs = () => fs.readdirSync(path.join(root, 'disks', 'blobs')).sort();
  const w2 = sub.disks.disk('disk-mch_ct2').writable;
  a2.client.session.destroy();
  // a container removed behind the substrate's back is reported lost, and destroy still cleans up
  execFileSync('podman', [...globalArgs(sub.env), 'rm', '--force', '--time', '0', 'computer-mch_ct2'], { env: { ...process.env, ...podmanEnv(sub.env) } });
  t.equal(await sub.status('mch_ct2'), 'lost');
  await sub.destroy('mch_ct2');
  t.equal(await sub.status('mch_ct2'), 'absent');
  t.notOk(blobs().includes(w2), "the fork's writable layer is gone");
  t.ok(blobs().includes(cap.layerId), 'the captured layer is still pinned by snap1');
  t.same(await sub.disks.unpin(cap.layerId, 'snap1'), [], 'unpinned but the restored disk stands on it: kept');
  t.same(await sub.disks.unpin(cap2.layerId, 'snap2'), [cap2.layerId], 'unpinned and unreferenced: freed');
  t.notOk(blobs().includes(cap2.layerId));
  a1c.client.session.destroy();
  await sub.destroy('mch_ct1');
  t.same(blobs(), [], 'nothing left in the layer store');
  const ps = execFileSync('podman', [...globalArgs(sub.env), 'ps', '-a', '--format', '{{.Names}}'], {
    env: { ...process.env, ...podmanEnv(sub.env) },
  }).toString();
  t.equal(ps.trim(), '', 'no containers left');
});
