// @ts-check
/**
 * The natively built dependencies on a host without a compiler (README: `npm install && npm start` on a fresh
 * Debian host). npm runs the root package's own install scripts only AFTER every dependency is installed, so
 * nothing can install a compiler before better-sqlite3 and node-pty compile (their prebuilt binaries come from
 * GitHub, which a host that reaches only the npm registry cannot download). They are optionalDependencies
 * instead: without a compiler their build fails and npm leaves them out, and the install succeeds. Then:
 *
 *   node scripts/native-modules.mjs after-install   (the root `postinstall`)
 *     Says which modules were left out and that `npm start` builds them. Fails the install (loudly) when the
 *     build tools ARE present and a module still does not load: that is a real build failure (CI runs
 *     scripts/setup-host.sh before `npm ci`, so this is where a broken build stops it).
 *   node scripts/native-modules.mjs ensure          (first step of `npm start`, before the TypeScript build)
 *     When a module does not load: makes sure the build tools are there (as root with apt-get:
 *     scripts/setup-host.sh with apt-get's output on the terminal; otherwise prints the one command and exits
 *     1), then installs (left out) or rebuilds (present, not loading) exactly those modules with the compiler's
 *     output on the terminal, and checks again that they load.
 *
 * Plain JavaScript on purpose: it runs before `tsc`, which cannot build the agent while node-pty (it ships its
 * own typings) is missing. Only node: builtins.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Each natively built dependency and a statement that throws unless its binary loads. */
export const NATIVE_MODULES = {
  'better-sqlite3': "new (require('better-sqlite3'))(':memory:').close()",
  'node-pty': "require('node-pty')",
};

/** program → the Debian package that ships it: what node-gyp runs (scripts/setup-host.sh installs them). */
export const BUILD_TOOLS = { python3: 'python3', make: 'make', cc: 'gcc', 'g++': 'g++' };

/**
 * @typedef {{ name: string, version: string, present: boolean, error: string | null }} ModuleState
 *   present: its package is in node_modules (npm leaves a failed optional build out entirely);
 *   error: why it does not load, null when it does.
 */

/**
 * Whether each native module loads, each probed in a fresh node (a failed load must not be cached).
 * @param {string} root the repository root (package.json, package-lock.json, node_modules/)
 * @returns {ModuleState[]}
 */
export function moduleStates(root) {
  return Object.entries(NATIVE_MODULES).map(([name, probe]) => {
    const present = fs.existsSync(path.join(root, 'node_modules', name, 'package.json'));
    const r = spawnSync(process.execPath, ['-e', probe], { cwd: root, encoding: 'utf8' });
    const error = r.status === 0 ? null : firstLine(r.stderr, name);
    return { name, version: lockedVersion(root, name), present, error };
  });
}

/** @param {string} stderr @param {string} name */
function firstLine(stderr, name) {
  const line = stderr.split('\n').find((l) => /Error|Cannot find/.test(l));
  return (line ?? `${name} does not load`).trim().slice(0, 200);
}

/**
 * The version package-lock.json pins (installing it keeps the tree what the lockfile says).
 * @param {string} root @param {string} name
 */
export function lockedVersion(root, name) {
  const lock = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8'));
  const v = lock.packages?.[`node_modules/${name}`]?.version;
  if (typeof v !== 'string') throw new Error(`package-lock.json pins no version of ${name}`);
  return v;
}

/**
 * The packages that provide the build tools `has` cannot find, sorted.
 * @param {(program: string) => boolean} has
 */
export function missingBuildTools(has) {
  return [...new Set(Object.entries(BUILD_TOOLS).filter(([p]) => !has(p)).map(([, pkg]) => pkg))].sort();
}

/**
 * The npm commands that build exactly the broken modules: left out → install the locked version without
 * touching package.json or package-lock.json; present but not loading → rebuild in place. Compiler output shown.
 * @param {ModuleState[]} broken
 * @returns {string[][]}
 */
export function buildCommands(broken) {
  const absent = broken.filter((m) => !m.present).map((m) => `${m.name}@${m.version}`);
  const present = broken.filter((m) => m.present).map((m) => m.name);
  return [
    ...(absent.length ? [['npm', 'install', '--no-save', '--no-audit', '--no-fund', '--foreground-scripts', ...absent]] : []),
    ...(present.length ? [['npm', 'rebuild', '--foreground-scripts', ...present]] : []),
  ];
}

/** @param {string} root */
export function setupCommand(root) {
  return `sudo bash ${path.join(root, 'scripts', 'setup-host.sh')}`;
}

/**
 * @param {string} program
 * @param {string} [pathVar]
 */
export function onPath(program, pathVar = process.env.PATH ?? '') {
  // root's tools live in sbin, which a non-login PATH may lack (the same rule as control-plane/src/host-packages.ts).
  return [...pathVar.split(':'), '/usr/local/sbin', '/usr/sbin', '/sbin'].some((d) => {
    try {
      fs.accessSync(path.join(d, program), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** @param {ModuleState[]} broken */
const names = (broken) => broken.map((m) => m.name).join(', ');

/**
 * The root `postinstall`. Returns the exit code.
 * @param {string} root @param {(line: string) => void} say @param {(line: string) => void} fail
 */
export function afterInstall(root, say, fail) {
  const broken = moduleStates(root).filter((m) => m.error);
  if (!broken.length) return 0;
  const tools = missingBuildTools((p) => onPath(p));
  if (tools.length) {
    say(`computer: ${names(broken)} not built: this host has no compiler (missing ${tools.join(', ')}).`);
    say('computer: `npm start` installs the build tools (as root; otherwise it prints the command) and builds them.');
    return 0;
  }
  // With the tools there, a module that does not load is a real build failure: fail the install loudly (CI).
  for (const m of broken) fail(`computer: ${m.name} failed to build although the build tools are present: ${m.error}`);
  fail(`computer: the build output: ${buildCommands(broken).map((c) => c.join(' ')).join(' && ')}`);
  return 1;
}

/**
 * First step of `npm start`. Returns the exit code.
 * @param {{ root: string, say: (line: string) => void, fail: (line: string) => void, canInstall?: boolean }} o
 */
export function ensure(o) {
  let broken = moduleStates(o.root).filter((m) => m.error);
  if (!broken.length) return 0;
  let tools = missingBuildTools((p) => onPath(p));
  if (tools.length) {
    const canInstall = o.canInstall ?? (process.getuid?.() === 0 && onPath('apt-get'));
    if (!canInstall) {
      o.fail(`computer: ${names(broken)} are not built and this host lacks the build tools (${tools.join(', ')}); install them (and the rest the service uses) with:\n  ${setupCommand(o.root)}\nthen run npm start again.`);
      return 1;
    }
    o.say(`host: installing the build tools for ${names(broken)} (scripts/setup-host.sh; apt-get output follows)`);
    const r = spawnSync('bash', [path.join(o.root, 'scripts', 'setup-host.sh')], { cwd: o.root, stdio: 'inherit' });
    tools = missingBuildTools((p) => onPath(p));
    if (r.status !== 0 || tools.length) {
      o.fail(`computer: installing the build tools failed (${tools.join(', ') || `exit ${r.status}`}); run it by hand:\n  ${setupCommand(o.root)}`);
      return 1;
    }
  }
  o.say(`native modules: building ${broken.map((m) => `${m.name}@${m.version}`).join(', ')} (compiler output follows; a minute or two, once)`);
  for (const [cmd, ...args] of buildCommands(broken)) spawnSync(cmd, args, { cwd: o.root, stdio: 'inherit' });
  // npm reports a failed optional build as success: only loading the module tells.
  broken = moduleStates(o.root).filter((m) => m.error);
  if (broken.length) {
    for (const m of broken) o.fail(`computer: ${m.name} still does not load after building it (${m.error}); the compiler output is above`);
    return 1;
  }
  o.say('native modules: built');
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const say = (/** @type {string} */ l) => process.stdout.write(`${l}\n`);
  const fail = (/** @type {string} */ l) => process.stderr.write(`${l}\n`);
  const mode = process.argv[2];
  if (mode === 'after-install') process.exit(afterInstall(root, say, fail));
  else if (mode === 'ensure') process.exit(ensure({ root, say, fail }));
  else {
    fail('usage: node scripts/native-modules.mjs after-install|ensure');
    process.exit(2);
  }
}
