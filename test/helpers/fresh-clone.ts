/**
 * A fresh clone running the README's `npm start`: this repository's HEAD commit cloned with git into a new 0700
 * directory (what a checkout under /root or a `mktemp -d` gives), node_modules linked in (nothing recompiled),
 * `npm start` with the default DATA_DIR (./data) on a free port, in its own process group. Commit before running:
 * the clone is of HEAD, not of the working tree. Teardown stops the server and lets go of what its container
 * substrate left on the host (mounts, its network, its reach directory). `cloneHead` alone: the clone without
 * `npm start` (the agent's tests run from a 0700 checkout: test/e2e/root-checkout.test.ts).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { REPO_ROOT } from './substrate-image.js';
import { freePort } from './free-port.js';

interface Teardown {
  teardown(fn: () => Promise<void> | void): void;
}

export interface FreshClone {
  /** The clone (its parent is 0700). */
  dir: string;
  /** Base URL `npm start` printed. */
  base: string;
  /** Everything `npm start` printed so far (stdout and stderr). */
  output(): string;
}


/** Resolves with the first match of `re` in the child's output; rejects if it exits first. */
function waitFor(child: ChildProcess, out: () => string, re: RegExp): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const m = re.exec(out());
      if (m) {
        child.stdout!.off('data', check);
        child.off('exit', exited);
        resolve(m);
      }
    };
    const exited = (code: number | null) => reject(new Error(`npm start exited (${code}) before ${re}:\n${out().slice(-4000)}`));
    child.stdout!.on('data', check);
    child.once('exit', exited);
    check();
  });
}

export interface HeadClone {
  /** The new 0700 directory (remove it when done). */
  top: string;
  /** The clone in it, node_modules linked. */
  dir: string;
}

/** HEAD cloned into `<new 0700 dir>/computer`, with this checkout's node_modules linked in (nothing recompiled). */
export function cloneHead(): HeadClone {
  const top = fs.mkdtempSync('/tmp/fresh-clone-');
  const dir = path.join(top, 'computer');
  const head = execFileSync('git', ['-C', REPO_ROOT, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
  execFileSync('git', ['clone', '--quiet', '--no-checkout', REPO_ROOT, dir]);
  execFileSync('git', ['-C', dir, 'checkout', '--quiet', '--detach', head]);
  fs.symlinkSync(fs.realpathSync(path.join(REPO_ROOT, 'node_modules')), path.join(dir, 'node_modules'));
  return { top, dir };
}

/** The README's environment: this process's, without DATA_DIR or any other setting of the test run (tap's own included). */
export function readmeEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(DATA_DIR|HOST|PUBLIC_BASE_URL|SUBSTRATE|PREVIEW_DOMAIN|SECRETS_KEYRING|IMAGE_CACHE_DIR|MACHINE_NETWORK|TAP.*|NODE_OPTIONS)$/.test(k)),
  );
}

export async function freshClone(t: Teardown): Promise<FreshClone> {
  const { top, dir } = cloneHead();
  const port = await freePort();
  // Nothing but PORT (and the tests' image cache) is set.
  const env = readmeEnv();
  // The tests' image cache, when they are given one (the README's default otherwise): the image is not built again.
  const cache = process.env.COMPUTER_IMAGE_CACHE ? { IMAGE_CACHE_DIR: process.env.COMPUTER_IMAGE_CACHE } : {};
  const child = spawn('npm', ['start'], { cwd: dir, env: { ...env, ...cache, PORT: String(port) }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = once(child, 'exit');
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
    }
    // What the server's container substrate left on the host: the same root, let go of (its base image is
    // never mounted here: teardown only destroys and unmounts).
    const root = path.join(dir, 'data', 'substrate');
    if (fs.existsSync(path.join(root, 'idmap.json'))) {
      const sub = new ContainerSubstrate({ root, baseRootfs: '/nonexistent' });
      for (const { id } of await sub.reattach()) await sub.destroy(id).catch(() => {});
      await sub.releaseMounts();
      fs.rmSync(sub.env.runDir!, { recursive: true, force: true });
    }
    fs.rmSync(top, { recursive: true, force: true });
  });
  const listening = await waitFor(child, () => out, /computer is listening on (http:\/\/\S+)/);
  return { dir, base: listening[1]!, output: () => out };
}
