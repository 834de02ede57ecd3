/**
 * The guest image: built once per content hash of its recipe (images/) and the agent build (compiled agent,
 * its production node_modules and the node binary), cached outside the repo, rebuilt only when one changes.
 * Two artifacts come from one root filesystem: `rootfs/` (container bottom layer) and, for the vm substrate,
 * `vmlinuz` + `initrd.img` + `base.qcow2`.
 */
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { compileSpawnHelper, SPAWN_HELPER_NAME } from '../../../agent/src/spawn/clean-spawn.js';

export type ImageArtifacts = 'container' | 'all';

export interface ImageOptions {
  /** The repository root (holds images/, agent/, shared/, node_modules/). */
  repoRoot: string;
  /** Where built images live, one directory per content hash. */
  cacheDir: string;
  artifacts: ImageArtifacts;
  /** The node binary copied into the guest; defaults to the one running this process. */
  nodeBinary?: string;
  /** Progress lines (build steps). */
  log?: (line: string) => void;
}

export interface GuestImage {
  hash: string;
  dir: string;
  /** Read-only root directory: the container substrate's bottom layer. */
  rootfs: string;
  kernel: string;
  initrd: string;
  /** qcow2 base disk (present when artifacts were `all`). */
  baseDisk: string;
}

/** The agent's runtime packages; better-sqlite3 stays out (the agent does not use it). */
export const AGENT_RUNTIME_PACKAGES = ['hono', '@hono/node-server', 'zod', 'node-pty', 'sharp'];

export function defaultImageCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'computer', 'images');
}

function run(cmd: string, args: string[], log: (l: string) => void, opts: { cwd?: string; allowFail?: boolean } = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d.toString('utf8');
      let i: number;
      while ((i = buf.search(/[\r\n]/)) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) log(line);
      }
    };
    p.stdout.on('data', onData);
    p.stderr.on('data', onData);
    p.on('error', reject);
    p.on('close', (code) => {
      if (buf.trim()) log(buf.trim());
      if (code !== 0 && !opts.allowFail) reject(new Error(`${path.basename(cmd)} exited with ${code}`));
      else resolve(code ?? 1);
    });
  });
}

/** Production dependency closure of `roots`, resolved in the flat node_modules of the repo. */
export function dependencyClosure(nodeModules: string, roots: string[]): string[] {
  const seen = new Set<string>();
  const visit = (name: string, optional: boolean) => {
    if (seen.has(name)) return;
    const pj = path.join(nodeModules, name, 'package.json');
    if (!fs.existsSync(pj)) {
      if (optional) return;
      throw new Error(`missing package ${name} in node_modules`);
    }
    seen.add(name);
    const meta = JSON.parse(fs.readFileSync(pj, 'utf8')) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    for (const d of Object.keys(meta.dependencies ?? {})) visit(d, false);
    // Optional deps are platform binaries (sharp's @img/*): only the ones installed for this platform exist.
    for (const d of Object.keys(meta.optionalDependencies ?? {})) visit(d, true);
  };
  for (const r of roots) visit(r, false);
  return [...seen].sort();
}

// Build-time-only parts of node-pty (sources, vendored deps); the runtime needs lib/ and build/Release.
const PRUNE: Record<string, string[]> = {
  'node-pty': ['deps', 'src', 'third_party', 'node-addon-api', 'scripts', 'prebuilds', 'build/Makefile', 'build/binding.Makefile', 'build/config.gypi', 'build/pty.target.mk', 'build/Release/obj.target', 'build/Release/.deps'],
};

/**
 * The tree's names, modes, sizes, link targets and contents, in name order, fed to `h`. Asynchronous, a file read in
 * chunks: a host process hashes its image while it serves and heartbeats (an image's tree is a node binary and a few
 * thousand files; read at once, a loaded host's event loop stopped for seconds and the host was declared down).
 */
async function hashTree(h: crypto.Hash, root: string, rel = ''): Promise<void> {
  const dir = path.join(root, rel);
  for (const name of (await fsp.readdir(dir)).sort()) {
    const r = path.join(rel, name);
    const st = await fsp.lstat(path.join(root, r));
    if (st.isDirectory()) await hashTree(h, root, r);
    else if (st.isSymbolicLink()) h.update(`L ${r} ${await fsp.readlink(path.join(root, r))}\n`);
    else {
      h.update(`F ${r} ${st.mode & 0o777} ${st.size}\n`);
      await hashContent(h, path.join(root, r));
    }
  }
}

async function hashContent(h: crypto.Hash, file: string): Promise<void> {
  for await (const chunk of fs.createReadStream(file)) h.update(chunk as Buffer);
}

async function hashFile(file: string): Promise<string> {
  const h = crypto.createHash('sha256');
  await hashContent(h, file);
  return h.digest('hex');
}

/** Compile the agent (and shared/) and collect its runtime node_modules into `app`. */
export async function stageAgent(repoRoot: string, app: string, log: (l: string) => void): Promise<void> {
  await fsp.rm(app, { recursive: true, force: true });
  await fsp.mkdir(app, { recursive: true });
  const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
  const errors: string[] = [];
  // Type errors elsewhere in a tree under active work must not block the image; they are reported.
  await run(process.execPath, [tsc, '-p', path.join(repoRoot, 'images', 'tsconfig.agent.json'), '--outDir', path.join(app, 'dist')], (l) => errors.push(l), {
    cwd: repoRoot,
    allowFail: true,
  });
  if (errors.length) log(`agent compile reported ${errors.filter((e) => e.includes('error TS')).length} type errors (emitted anyway)`);
  if (!fs.existsSync(path.join(app, 'dist', 'agent', 'src', 'main.js'))) log('warning: dist/agent/src/main.js is missing: the guest has no agent entry point yet');
  await fsp.writeFile(path.join(app, 'package.json'), JSON.stringify({ name: 'computer-agent', private: true, type: 'module' }) + '\n');
  // The fd-closing exec step every agent spawn goes through (agent/src/spawn/clean-spawn.ts).
  await compileSpawnHelper(path.join(repoRoot, 'agent', 'native', `${SPAWN_HELPER_NAME}.c`), path.join(app, 'libexec', SPAWN_HELPER_NAME));
  const nm = path.join(repoRoot, 'node_modules');
  for (const pkg of dependencyClosure(nm, AGENT_RUNTIME_PACKAGES)) {
    const dst = path.join(app, 'node_modules', pkg);
    await fsp.mkdir(path.dirname(dst), { recursive: true });
    await fsp.cp(path.join(nm, pkg), dst, { recursive: true, verbatimSymlinks: true });
    for (const p of PRUNE[pkg] ?? []) await fsp.rm(path.join(dst, p), { recursive: true, force: true });
  }
}

/** Hash of what the Debian base stage depends on: the package list, the build script, the initrd. */
export async function baseHash(repoRoot: string): Promise<string> {
  const h = crypto.createHash('sha256');
  for (const f of ['packages.txt', 'build.sh']) h.update(`${f}\n`).update(await fsp.readFile(path.join(repoRoot, 'images', f)));
  await hashTree(h, path.join(repoRoot, 'images', 'initrd'));
  return h.digest('hex').slice(0, 20);
}

/** The content hash: recipe files, staged agent tree, node binary. */
export async function imageHash(repoRoot: string, app: string, nodeBinary: string): Promise<string> {
  const h = crypto.createHash('sha256');
  h.update('recipe\n');
  await hashTree(h, path.join(repoRoot, 'images'));
  h.update('app\n');
  await hashTree(h, app);
  h.update(`node ${await hashFile(nodeBinary)}\n`);
  return h.digest('hex').slice(0, 20);
}

function artifactsOf(dir: string, hash: string): GuestImage {
  return {
    hash,
    dir,
    rootfs: path.join(dir, 'rootfs'),
    kernel: path.join(dir, 'vmlinuz'),
    initrd: path.join(dir, 'initrd.img'),
    baseDisk: path.join(dir, 'base.qcow2'),
  };
}

/**
 * The parts build.sh marks when it has made them (it writes the marker last, and skips a marked part), each with what
 * must still be there for the marker to count: a rootfs emptied from outside (a checkout deleted with a machine's
 * mounts still live) keeps its marker, and every machine made from it would fail with a disk that has no /etc.
 */
const PARTS = {
  rootfs: { marker: 'rootfs.done', holds: path.join('rootfs', 'etc') },
  vm: { marker: 'vm.done', holds: 'base.qcow2' },
} as const;
type Part = (typeof PARTS)[keyof typeof PARTS];

const has = (dir: string, rel: string): boolean => fs.existsSync(path.join(dir, rel));
const built = (dir: string, part: Part): boolean => has(dir, part.marker) && has(dir, part.holds);

function isComplete(dir: string, artifacts: ImageArtifacts): boolean {
  return built(dir, PARTS.rootfs) && (artifacts === 'container' || built(dir, PARTS.vm));
}

/** A marker left beside what it stood for is dropped, so build.sh builds that part again. */
export function dropStaleMarkers(dir: string, log: (l: string) => void): void {
  if (has(dir, PARTS.rootfs.marker) && !has(dir, PARTS.rootfs.holds)) {
    log(`the cached image in ${dir} has lost its root filesystem (no /etc): building it again`);
    // The VM disk is made from the rootfs: it goes too.
    for (const p of [PARTS.rootfs, PARTS.vm]) fs.rmSync(path.join(dir, p.marker), { force: true });
  } else if (has(dir, PARTS.vm.marker) && !has(dir, PARTS.vm.holds)) {
    log(`the cached image in ${dir} has lost its VM disk: building it again`);
    fs.rmSync(path.join(dir, PARTS.vm.marker), { force: true });
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** One builder per hash across processes (tests in parallel, a CLI run): a lock directory holding the pid. */
async function withLock<T>(lockDir: string, log: (l: string) => void, fn: () => Promise<T>): Promise<T> {
  let announced = false;
  for (;;) {
    try {
      fs.mkdirSync(lockDir);
      fs.writeFileSync(path.join(lockDir, 'pid'), String(process.pid));
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      let holder = 0;
      try {
        holder = Number(fs.readFileSync(path.join(lockDir, 'pid'), 'utf8'));
      } catch {
        /* being written */
      }
      if (holder && !pidAlive(holder)) {
        fs.rmSync(lockDir, { recursive: true, force: true });
        continue;
      }
      if (!announced) log('waiting for another build of this image');
      announced = true;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lockDir, { recursive: true, force: true });
  }
}

/** Return the cached image for the current recipe and agent, building what is missing. */
export async function ensureImage(opts: ImageOptions): Promise<GuestImage> {
  const log = opts.log ?? (() => {});
  const nodeBinary = opts.nodeBinary ?? process.execPath;
  fs.mkdirSync(opts.cacheDir, { recursive: true });
  const app = fs.mkdtempSync(path.join(opts.cacheDir, '.stage-'));
  try {
    log('staging the agent (tsc + runtime node_modules)');
    await stageAgent(opts.repoRoot, app, log);
    const hash = await imageHash(opts.repoRoot, app, nodeBinary);
    const dir = path.join(opts.cacheDir, hash);
    if (isComplete(dir, opts.artifacts)) {
      log(`image ${hash} is cached`);
      return artifactsOf(dir, hash);
    }
    const script = path.join(opts.repoRoot, 'images', 'build.sh');
    const bh = await baseHash(opts.repoRoot);
    const baseDir = path.join(opts.cacheDir, 'debian', bh);
    fs.mkdirSync(path.dirname(baseDir), { recursive: true });
    await withLock(`${baseDir}.lock`, log, async () => {
      if (fs.existsSync(path.join(baseDir, 'base.done'))) return;
      log(`building the Debian base ${bh} in ${baseDir} (about 2 minutes)`);
      await run('bash', [script, 'base', baseDir], log);
    });
    return await withLock(path.join(opts.cacheDir, `${hash}.lock`), log, async () => {
      if (!isComplete(dir, opts.artifacts)) {
        dropStaleMarkers(dir, log);
        log(`building image ${hash} (${opts.artifacts}) in ${dir}`);
        await run('bash', [script, 'image', dir, baseDir, app, nodeBinary, opts.artifacts], log);
      }
      return artifactsOf(dir, hash);
    });
  } finally {
    await fsp.rm(app, { recursive: true, force: true });
  }
}

/** Newest complete image in the cache (for tools that must not rebuild). */
export function latestCachedImage(cacheDir: string, artifacts: ImageArtifacts): GuestImage | null {
  if (!fs.existsSync(cacheDir)) return null;
  const dirs = fs
    .readdirSync(cacheDir)
    .filter((n) => /^[0-9a-f]{20}$/.test(n) && isComplete(path.join(cacheDir, n), artifacts))
    .map((n) => ({ n, t: fs.statSync(path.join(cacheDir, n, PARTS.rootfs.marker)).mtimeMs }))
    .sort((a, b) => b.t - a.t);
  return dirs.length ? artifactsOf(path.join(cacheDir, dirs[0]!.n), dirs[0]!.n) : null;
}
