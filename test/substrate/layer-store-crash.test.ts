/**
 * A process killed with SIGKILL in the middle of a capture leaks no layer: a real child process copies a
 * machine's writable layer into a new layer (the copying backend, so the copy takes long enough to be caught
 * half way) and is killed while the new blob exists but is not yet recorded; the store opened again deletes
 * that blob and holds exactly what it held before the capture began.
 */
import t from 'tap';
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

t.test('SIGKILL mid-capture: the reopened store sweeps the half-made blob', async (t) => {
  const { root, base, dir, store, disk } = await storeWithDisk(t, 'layers-kill-');
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
  // Its own process group: the kill below takes the whole process tree, as a crash of the control plane's service
  // does (its `cp` included; a copy left running would still be writing while the reopened store sweeps).
  const proc = spawn(process.execPath, [...process.execArgv, child], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  proc.stdout.on('data', (b) => (out += b));
  proc.stderr.on('data', (b) => (out += b));
  const exited = new Promise<NodeJS.Signals | number | null>((r) => proc.on('exit', (code, sig) => r(sig ?? code)));
  // Kill it once the new blob exists and is being filled, before the state file names it.
  let caught = false;
  for (let i = 0; i < 6000 && proc.exitCode === null; i++) {
    const extra = fs.readdirSync(path.join(dir, 'blobs')).filter((b) => !before.includes(b));
    if (extra.length && fs.existsSync(path.join(dir, 'blobs', extra[0]!, 'diff'))) {
      process.kill(-proc.pid!, 'SIGKILL');
      caught = true;
      break;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  t.equal(await exited, caught ? 'SIGKILL' : 0, `the child was killed mid-capture (${out.trim() || 'no output'})`);
  t.ok(caught, 'caught the capture half way');
  t.notOk(out.includes('finished'), 'the capture never finished');
  t.equal(fs.readFileSync(path.join(dir, 'state.json'), 'utf8'), stateBefore, 'the state file never named the half-made layer');
  t.not(fs.readdirSync(path.join(dir, 'blobs')).length, before.length, 'a half-made blob was left on disk');

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
