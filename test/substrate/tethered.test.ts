/**
 * The guard of tethered commands (substrate/disks/tethered.ts): a command runs only while its parent is still
 * the control plane that started it, so one whose control plane died before the death signal was set runs
 * nothing (the other half, the kernel's SIGKILL when the control plane dies, is drilled in
 * layer-store-crash.test.ts).
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ORPHANED_EXIT, runTethered, tetheredArgv } from '../../control-plane/src/substrate/disks/tethered.js';

const execFileP = promisify(execFile);

t.test('runs the command with its arguments as given, and its failures are its own', async (t) => {
  const r = await runTethered('printf', ['%s|', 'a b', '$HOME', "it's"]);
  t.equal(r.stdout, "a b|$HOME|it's|", 'arguments pass through untouched by the shell');
  await t.rejects(runTethered('sh', ['-c', 'exit 3']), { code: 3 });
});

t.test('under a parent other than the one named, nothing runs', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tethered-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const mark = path.join(dir, 'ran');
  // Named parent 1: this process is not it, as a control plane killed right after the fork would not be.
  const [file, ...argv] = tetheredArgv(1, 'touch', [mark]);
  await t.rejects(execFileP(file, argv), { code: ORPHANED_EXIT });
  t.notOk(fs.existsSync(mark), 'the command never ran');
  const [f2, ...a2] = tetheredArgv(process.pid, 'touch', [mark]);
  await execFileP(f2, a2);
  t.ok(fs.existsSync(mark), 'under its own parent it runs');
});
