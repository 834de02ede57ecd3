/**
 * Integration, vm substrate (real QEMU; TCG on hosts without usable KVM, so one VM at a time and generous
 * timeouts). Boot, agent over virtio-serial, screenshot, exec, live capture, a fork boots with the file.
 * The first machine is created with network none (the default): it has no tap and only lo in the guest, and no
 * nameservers (test/substrate/vm-network.test.ts leaves this check to this boot).
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { VmSubstrate } from '../../control-plane/src/substrate/vm/driver.js';
import { testImage, waitForAgent } from '../helpers/substrate-image.js';
import type { H2Client } from '../helpers/h2-client.js';

const res = { vcpu: 2, memory_mb: 2048, disk_gb: 6 };
const BOOT_MS = 240_000;

async function exec(c: H2Client, command: string[]): Promise<{ stdout: string; stderr: string; exit_code: number }> {
  const r = await c.request('POST', '/exec', { command, timeout_ms: 60_000 });
  if (r.status !== 200) throw new Error(`exec status ${r.status}: ${r.body.toString()}`);
  return r.json();
}


// Longer than the suite's per-file timeout: a first run builds the image (~2 min) and TCG boots two VMs.
t.setTimeout(1_800_000);
t.test('vm substrate end to end', { timeout: 1_500_000 }, async (t) => {
  const image = await testImage('all');
  const root = fs.mkdtempSync('/tmp/vs-');
  const warnings: string[] = [];
  const sub = new VmSubstrate({ root, kernel: image.kernel, initrd: image.initrd, baseDisk: image.baseDisk, stopTimeoutMs: 60_000, warn: (m) => warnings.push(m) });
  const clients: H2Client[] = [];
  t.teardown(async () => {
    for (const c of clients) c.session.destroy();
    for (const id of ['mch_vm1', 'mch_vm2']) await sub.destroy(id).catch(() => {});
    await sub.removeNetwork();
    fs.rmSync(root, { recursive: true, force: true });
  });
  if (sub.accel === 'tcg') t.ok(warnings.some((w) => w.includes('TCG')), 'running under TCG is warned about');

  const token1 = crypto.randomBytes(24).toString('hex');
  await sub.create({ id: 'mch_vm1', resources: res, source: { kind: 'base' } });
  t.equal(await sub.status('mch_vm1'), 'running');
  t.equal(fs.statSync(path.join(root, 'machines', 'mch_vm1')).mode & 0o777, 0o700, 'run dir is 0700');
  const a1 = await waitForAgent(sub, 'mch_vm1', token1, BOOT_MS);
  clients.push(a1.client);
  t.equal(a1.health.ok, true, 'agent ready over virtio-serial');
  t.notOk(fs.existsSync(`/sys/class/net/${sub.tapName('mch_vm1')}`), 'no tap for network none');
  const links = await exec(a1.client, ['sh', '-c', "ip -o link | awk -F': ' '{print $2}'; cat /etc/resolv.conf"]);
  t.equal(links.stdout, 'lo\n', 'network none: loopback only, no nameservers');

  const shot = await a1.client.request('GET', '/screenshot?format=png');
  t.equal(shot.status, 200);
  t.same([...Buffer.from(shot.json().image, 'base64').subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], 'a PNG frame');

  // Chromium works for the agent user, with its sandbox, in a VM
  const open = await a1.client.request('POST', '/browser/open', { url: 'about:blank' });
  t.equal(open.status, 200, 'browser open');
  let win = { stdout: '', stderr: '', exit_code: 1 };
  for (let i = 0; i < 120 && win.exit_code !== 0; i++) {
    win = await exec(a1.client, ['sh', '-c', 'DISPLAY=:0 xdotool search --onlyvisible --class chromium']);
    if (win.exit_code !== 0) await new Promise((r) => setTimeout(r, 1000));
  }
  t.equal(win.exit_code, 0, 'a chromium window is on the display');
  const procs = await exec(a1.client, ['sh', '-c', 'ps -C chromium -o user= | sort -u; ps -C chromium -o args= | grep -c -- --no-sandbox']);
  t.equal(procs.stdout, 'agent\n0\n', 'chromium runs as the agent user, sandboxed');

  const content = `vm ${crypto.randomBytes(8).toString('hex')}`;
  const w = await exec(a1.client, ['sh', '-c', `printf '%s' '${content}' > /home/agent/note.txt && sync && id -un && df -B1M --output=size / | tail -1`]);
  t.equal(w.exit_code, 0);
  t.match(w.stdout, /^agent\n/);
  t.ok(Number(w.stdout.split('\n')[1]) > 5000, 'root filesystem grown to the machine disk size');

  // live capture: the machine keeps running and answering
  const cap = await sub.capture('mch_vm1', 'snap1');
  t.equal(cap.live, true);
  t.equal((await exec(a1.client, ['cat', '/home/agent/note.txt'])).stdout, content, 'still running after the live capture');
  t.same((await sub.diskUsage('mch_vm1')).chain, [cap.layerId], 'the old writable file is now the layer under the disk');

  // Under TCG one VM at a time: stop the first before booting the fork.
  a1.client.session.destroy();
  await sub.stop('mch_vm1');
  t.equal(await sub.status('mch_vm1'), 'stopped');

  const token2 = crypto.randomBytes(24).toString('hex');
  await sub.create({ id: 'mch_vm2', resources: res, source: { kind: 'layer', layerId: cap.layerId } });
  const a2 = await waitForAgent(sub, 'mch_vm2', token2, BOOT_MS);
  clients.push(a2.client);
  t.equal((await exec(a2.client, ['cat', '/home/agent/note.txt'])).stdout, content, 'fork boots with the file');
  a2.client.session.destroy();

  // a restarted control plane re-attaches through the pid file; a VM killed while it was away is lost
  const sub2 = new VmSubstrate({ root, kernel: image.kernel, initrd: image.initrd, baseDisk: image.baseDisk });
  t.same((await sub2.reattach()).sort((a, b) => a.id.localeCompare(b.id)), [
    { id: 'mch_vm1', status: 'stopped' },
    { id: 'mch_vm2', status: 'running' },
  ]);
  process.kill(Number(fs.readFileSync(path.join(root, 'machines', 'mch_vm2', 'qemu.pid'), 'utf8')), 'SIGKILL');
  for (let i = 0; i < 50 && (await sub2.status('mch_vm2')) === 'running'; i++) await new Promise((r) => setTimeout(r, 100));
  t.equal(await sub2.status('mch_vm2'), 'lost');

  await sub.destroy('mch_vm2');
  await sub.destroy('mch_vm1');
  t.same(await sub.disks.unpin(cap.layerId, 'snap1'), [cap.layerId]);
  t.same(fs.readdirSync(path.join(root, 'disks', 'blobs')), [], 'all layers freed');
});
