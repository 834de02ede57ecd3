/**
 * Staging the agent and hashing the image run inside a control plane that serves and heartbeats meanwhile (a host's
 * DeferredSubstrate prepares its image after `serve` has started): they must not stop its event loop. On a loaded host
 * the synchronous compile of the spawn helper, tree copies and whole-file reads stopped it for about 7 s, past
 * HOST_DOWN_AFTER_MS with a heartbeat's period, so a host preparing its image was declared down and its first
 * machines failed (found by the three-host drill under load). Pinned here by what is called, not by a clock: no
 * synchronous child process, no synchronous tree copy, no synchronous read of more than a small file.
 */
import childProcess from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { syncBuiltinESMExports } from 'node:module';
import t from 'tap';
import { imageHash, stageAgent } from '../../control-plane/src/substrate/image.js';
import { REPO_ROOT } from '../helpers/substrate-image.js';

/** A package.json or a recipe file is read whole; anything bigger is read in chunks, asynchronously. */
const SMALL_READ = 256 * 1024;

t.test('staging the agent and hashing the image make no blocking call that runs a program, copies a tree or reads a big file', async (t) => {
  const app = fs.mkdtempSync(path.join(os.tmpdir(), 'image-staging-'));
  t.teardown(() => fs.rmSync(app, { recursive: true, force: true }));
  const blocking: string[] = [];
  const { execFileSync, execSync, spawnSync } = childProcess;
  const { cpSync, readFileSync } = fs;
  const restore = () => {
    Object.assign(childProcess, { execFileSync, execSync, spawnSync });
    Object.assign(fs, { cpSync, readFileSync });
    syncBuiltinESMExports();
  };
  t.teardown(restore);
  Object.assign(childProcess, {
    execFileSync: (file: string, ...rest: never[]) => (blocking.push(`execFileSync ${file}`), Reflect.apply(execFileSync, childProcess, [file, ...rest])),
    execSync: (cmd: string, ...rest: never[]) => (blocking.push(`execSync ${cmd}`), Reflect.apply(execSync, childProcess, [cmd, ...rest])),
    spawnSync: (file: string, ...rest: never[]) => (blocking.push(`spawnSync ${file}`), Reflect.apply(spawnSync, childProcess, [file, ...rest])),
  });
  Object.assign(fs, {
    cpSync: (from: string, ...rest: never[]) => (blocking.push(`cpSync ${String(from)}`), Reflect.apply(cpSync, fs, [from, ...rest])),
    readFileSync: (file: fs.PathOrFileDescriptor, ...rest: never[]) => {
      const out: string | Buffer = Reflect.apply(readFileSync, fs, [file, ...rest]);
      if (out.length > SMALL_READ) blocking.push(`readFileSync ${String(file)} (${out.length} bytes)`);
      return out;
    },
  });
  syncBuiltinESMExports();

  await stageAgent(REPO_ROOT, app, () => {});
  const hash = await imageHash(REPO_ROOT, app, process.execPath);
  restore();

  t.match(hash, /^[0-9a-f]{20}$/);
  t.ok(fs.existsSync(path.join(app, 'libexec', 'computer-spawn')), 'the spawn helper was compiled');
  t.ok(fs.existsSync(path.join(app, 'node_modules', 'sharp', 'package.json')), 'the runtime packages were copied');
  t.same(blocking, [], 'nothing blocked the event loop');
});
