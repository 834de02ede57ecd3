/**
 * A process killed with SIGKILL in the middle of a capture leaks no layer: a real child process copies a
 * machine's writable layer into a new layer (the copying backend, so the copy takes long enough to be caught
 * half way) and is killed while the new blob exists but is not yet recorded; the store opened again deletes
 * that blob and holds exactly what it held before the capture began.
 */
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LayerStore } from '../../control-plane/src/substrate/disks/layer-store.js';
import { OverlayBackend } from '../../control-plane/src/substrate/disks/overlay-backend.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** A temp root (removed at teardown) with a base directory and a store holding one disk, `disk-a`, on it. */
async function storeWithDisk(t: { teardown(fn: () => void): void }, prefix: string) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
  const base = path.join(root, 'base');
  fs.mkdirSync(base);
  const dir = path.join(root, 'store');
  const store = new LayerStore(dir, new OverlayBackend());
  const disk = await store.newDisk({ id: 'disk-a', base, top: null, sizeBytes: 1024 ** 3 });
  return { root, base, dir, store, disk };
}

/**
 * A child process copying `disk-a`'s writable layer (filled so the copy takes a while) into a new layer, killed
 * with SIGKILL once the new blob exists and is being filled, before the state file names it: `group` kills its
 * whole process group (a crash of the control plane's service), `node` only the node process (a bare `kill -9`
 * of its pid), which leaves whatever it started to the kernel. Returns the half-made blob's path.
 */
async function killedMidCopy(
  t: Test,
  s: Awaited<ReturnType<typeof storeWithDisk>>,
  how: 'group' | 'node',
): Promise<{ before: string[]; stateBefore: string; half: string }> {
  const { root, dir, store, disk } = s;
  // Enough files that `cp -a` takes a while (thousands of small files, then a large one).
  const diff = path.join(store.blobPath(disk.writable), 'diff');
  for (let d = 0; d < 40; d++) {
    fs.mkdirSync(path.join(diff, `d${d}`));
    for (let i = 0; i < 100; i++) fs.writeFileSync(path.join(diff, `d${d}`, `f${i}`), `file ${d}/${i}\n`.repeat(64));
  }
  fs.writeFileSync(path.join(diff, 'big'), Buffer.alloc(256 * 1024 * 1024, 7));
  const before = fs.readdirSync(path.join(dir, 'blobs')).sort();
  const stateBefore = fs.readFileSync(path.join(dir, 'state.json'), 'utf8');

  const child = path.join(root, 'capture.mts');
  fs.writeFileSync(
    child,
    `import { LayerStore } from ${JSON.stringify(path.join(REPO, 'control-plane/src/substrate/disks/layer-store.js'))};
import { OverlayBackend } from ${JSON.stringify(path.join(REPO, 'control-plane/src/substrate/disks/overlay-backend.js'))};
const s = new LayerStore(${JSON.stringify(dir)}, new OverlayBackend());
await s.copyToLayer('disk-a', 'snp_killedmidcapture000000000');
console.log('finished');
`,
  );
  // Its own process group either way, so `group` takes exactly the child's tree and nothing of this test's.
  const proc = spawn(process.execPath, [...process.execArgv, child], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  proc.stdout.on('data', (b) => (out += b));
  proc.stderr.on('data', (b) => (out += b));
  const exited = new Promise<NodeJS.Signals | number | null>((r) => proc.on('exit', (code, sig) => r(sig ?? code)));
  let half = '';
  for (let i = 0; i < 6000 && proc.exitCode === null; i++) {
    const extra = fs.readdirSync(path.join(dir, 'blobs')).filter((b) => !before.includes(b));
    if (extra.length && fs.existsSync(path.join(dir, 'blobs', extra[0]!, 'diff'))) {
      half = path.join(dir, 'blobs', extra[0]!);
      if (how === 'group') process.kill(-proc.pid!, 'SIGKILL');
      else proc.kill('SIGKILL');
      break;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  t.equal(await exited, half ? 'SIGKILL' : 0, `the child was killed mid-capture (${out.trim() || 'no output'})`);
  t.ok(half, 'caught the capture half way');
  t.notOk(out.includes('finished'), 'the capture never finished');
  t.equal(fs.readFileSync(path.join(dir, 'state.json'), 'utf8'), stateBefore, 'the state file never named the half-made layer');
  t.not(fs.readdirSync(path.join(dir, 'blobs')).length, before.length, 'a half-made blob was left on disk');
  return { before, stateBefore, half };
}

/** The reopened store swept the half-made blob, holds what it held before, and captures again. */
async function sweptAndWorks(t: Test, s: Awaited<ReturnType<typeof storeWithDisk>>, before: string[]): Promise<void> {
  const { dir, disk } = s;
  const reopened = new LayerStore(dir, new OverlayBackend());
  await reopened.settled();
  t.same(fs.readdirSync(path.join(dir, 'blobs')).sort(), before, 'the reopened store deleted it: nothing leaked');
  t.same(reopened.layers(), [], 'no layer');
  t.same(reopened.pins(), [], 'no pin');
  t.equal(reopened.disk('disk-a').writable, disk.writable, "the machine's disk is untouched");
  const again = await reopened.copyToLayer('disk-a', 'snp_retry');
  t.ok(again.bytes > 256 * 1024 * 1024, 'a capture after the crash works');
  await reopened.unpin(again.id, 'snp_retry');
  await reopened.deleteDisk('disk-a');
  t.same(fs.readdirSync(path.join(dir, 'blobs')), []);
}

/**
 * Live processes (not zombies) with an argument inside `blob`, and whether each already has SIGKILL pending
 * (the kernel is taking it down: it starts no further system call).
 */
function processesOn(blob: string): Array<{ pid: number; argv: string[]; dying: boolean }> {
  const out: Array<{ pid: number; argv: string[]; dying: boolean }> = [];
  for (const p of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(p)) continue;
    try {
      const argv = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').filter(Boolean);
      if (!argv.some((a) => a === blob || a.startsWith(blob + '/'))) continue;
      const status = fs.readFileSync(`/proc/${p}/status`, 'utf8');
      if (/^State:\s+[ZX]/m.test(status)) continue;
      const pending = [...status.matchAll(/^(?:SigPnd|ShdPnd):\s+([0-9a-f]+)$/gm)].map((m) => BigInt('0x' + m[1]));
      out.push({ pid: Number(p), argv, dying: pending.some((m) => (m & (1n << 8n)) !== 0n) });
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

t.test('SIGKILL of the process group mid-capture: the reopened store sweeps the half-made blob', async (t) => {
  const s = await storeWithDisk(t, 'layers-kill-');
  const { before } = await killedMidCopy(t, s, 'group');
  await sweptAndWorks(t, s, before);
});

/**
 * Issue 21 item 7: a bare `kill -9` of the node process alone. Its copy must not outlive it: by the time the
 * process is seen dead, every process still copying into the half-made blob has SIGKILL pending (it starts no
 * further system call, so it can add nothing the sweep would have to race with), and once they are gone the
 * sweep has deleted the blob and nothing refills it. Without the tethering the `cp` runs on, orphaned.
 */
t.test('SIGKILL of the node process alone mid-capture: no copy outlives it to race the sweep', async (t) => {
  const s = await storeWithDisk(t, 'layers-kill-node-');
  const { before, half } = await killedMidCopy(t, s, 'node');
  const left = processesOn(half);
  t.same(left.filter((p) => !p.dying).map((p) => p.argv[0]), [], 'no copy into the half-made blob outlived the control plane');
  // Never leave a stray copy behind this test, with or without the fix.
  for (const p of left) if (!p.dying) process.kill(p.pid, 'SIGKILL');
  await sweptAndWorks(t, s, before);
  for (let i = 0; i < 2000 && processesOn(half).length; i++) await new Promise((r) => setTimeout(r, 5));
  t.same(processesOn(half), [], 'the killed copies are gone');
  t.same(fs.readdirSync(path.join(s.dir, 'blobs')), [], 'nothing refilled the swept blob');
});

/**
 * A live VM capture the control plane died in: the store saved its intent, then QEMU (here: the child itself)
 * made the new writable blob and the guest wrote into it, then the process was killed before the state named
 * it. The reopened store adopts it (the running guest's writes live there) instead of sweeping it; if the
 * process died before the new blob existed, the intent is dropped and the disk is as it was.
 */
t.test('SIGKILL mid live freeze: a new writable blob is adopted, never swept', async (t) => {
  const { root, base, dir, store, disk } = await storeWithDisk(t, 'layers-live-');
  fs.writeFileSync(path.join(store.blobPath(disk.writable), 'diff', 'before'), 'written before the capture');
  await store.settled();

  const runChild = async (switchFirst: boolean) => {
    const child = path.join(root, `live-${switchFirst}.mts`);
    fs.writeFileSync(
      child,
      `import fs from 'node:fs';
import path from 'node:path';
import { LayerStore } from ${JSON.stringify(path.join(REPO, 'control-plane/src/substrate/disks/layer-store.js'))};
import { OverlayBackend } from ${JSON.stringify(path.join(REPO, 'control-plane/src/substrate/disks/overlay-backend.js'))};
const b = new OverlayBackend();
const s = new LayerStore(${JSON.stringify(dir)}, b);
await s.freeze('disk-a', 'snp_live', async (newPath, frozenPath) => {
  if (${switchFirst}) {
    // What QEMU's blockdev-snapshot-sync does: a new writable file on top of the frozen one; then the guest writes.
    await b.createWritable(newPath, [frozenPath, ${JSON.stringify(base)}], 1024 ** 3);
    fs.writeFileSync(path.join(newPath, 'diff', 'after'), 'written after the switch');
  }
  process.kill(process.pid, 'SIGKILL');
});
console.log('finished');
`,
    );
    const proc = spawn(process.execPath, [...process.execArgv, child], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (b) => (out += b));
    proc.stderr.on('data', (b) => (out += b));
    const sig = await new Promise<NodeJS.Signals | number | null>((r) => proc.on('exit', (code, s) => r(s ?? code)));
    t.equal(sig, 'SIGKILL', `killed inside the live freeze (${out.trim() || 'no output'})`);
    t.match(JSON.parse(fs.readFileSync(path.join(dir, 'state.json'), 'utf8')), { intents: [{ disk: 'disk-a', holder: 'snp_live' }] }, 'the intent was saved first');
  };

  await runChild(false);
  let reopened = new LayerStore(dir, new OverlayBackend());
  await reopened.settled();
  t.equal(reopened.disk('disk-a').writable, disk.writable, 'never switched: the disk is as it was');
  t.same(reopened.layers(), []);
  t.same(fs.readdirSync(path.join(dir, 'blobs')), [path.basename(reopened.blobPath(disk.writable))], 'no blob left');
  t.notOk('intents' in JSON.parse(fs.readFileSync(path.join(dir, 'state.json'), 'utf8')), 'intent dropped');

  await runChild(true);
  reopened = new LayerStore(dir, new OverlayBackend());
  await reopened.settled();
  const d = reopened.disk('disk-a');
  t.not(d.writable, disk.writable, 'the new writable blob is the disk\'s now');
  t.equal(d.top, disk.writable, 'the frozen blob is the layer under it');
  t.same(reopened.pins().map((p) => [p.layerId, p.holder]), [[disk.writable, 'snp_live']], 'pinned by the capture\'s holder');
  t.equal(fs.readFileSync(path.join(reopened.blobPath(d.writable), 'diff', 'after'), 'utf8'), 'written after the switch', 'the guest\'s writes kept');
  t.notOk('intents' in JSON.parse(fs.readFileSync(path.join(dir, 'state.json'), 'utf8')));
  await reopened.unpin(disk.writable, 'snp_live');
  await reopened.deleteDisk('disk-a');
  t.same(fs.readdirSync(path.join(dir, 'blobs')), [], 'nothing leaks afterwards');
});
