// @ts-check
/**
 * `npm test` on a fresh host (the root `pretest`; issue 21 item 5). The suite needs what
 * `scripts/setup-host.sh --test` provides (the system packages, and the `agent` user the agent's tests act as)
 * and the two natively built modules. Like `npm start`:
 *   1. asks `setup-host.sh --test --check` what is owed (it holds the one package list; it changes nothing);
 *      as root with apt-get, runs `setup-host.sh --test` with apt-get's progress on the terminal; otherwise
 *      prints the one command to run and exits 1;
 *   2. then makes sure better-sqlite3 and node-pty load (native-modules.mjs `ensure`, the first step of
 *      `npm start`: built once, with the compiler's output on the terminal).
 *   3. checks that the `agent` user can enter the checkout: the agent's tests run its files worker and the
 *      programs it starts as that user, from this checkout, so a checkout under a directory closed to others
 *      (/root is 0700) fails them one by one; instead this names the directory and stops.
 * A host that owes nothing (CI runs setup-host.sh first) costs a dpkg query and two module loads.
 * Plain JavaScript on purpose: it runs before `tsc`. Only node: builtins.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensure, onPath } from './native-modules.mjs';

/** @typedef {{ packages: string[], agentUser: boolean }} Owed  what `setup-host.sh --test --check` reported */

/**
 * The owed things from `setup-host.sh --check`'s output (pure). Unknown lines are ignored.
 * @param {string} out
 * @returns {Owed}
 */
export function parseCheck(out) {
  /** @type {Owed} */
  const owed = { packages: [], agentUser: false };
  for (const line of out.split('\n')) {
    const m = /^(missing-packages|missing-user): (.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === 'missing-packages') owed.packages.push(...m[2].split(/\s+/).filter((p) => /^[a-z0-9][a-z0-9+.-]*$/.test(p)));
    else if (m[2].trim() === 'agent') owed.agentUser = true;
  }
  return owed;
}

/**
 * @typedef {{ kind: 'none' } | { kind: 'setup', what: string, command: string[] } | { kind: 'tell', what: string, command: string }} TestHostStep
 *   none: nothing owed; setup: run `command` (argv) now; tell: print `command` and stop.
 */

/**
 * Which step `npm test` owes before it runs (pure).
 * @param {Owed} owed
 * @param {{ root: string, canInstall: boolean }} host
 * @returns {TestHostStep}
 */
export function testHostStep(owed, host) {
  const parts = [...(owed.packages.length ? [`system packages (${owed.packages.join(', ')})`] : []), ...(owed.agentUser ? ['the `agent` user'] : [])];
  if (!parts.length) return { kind: 'none' };
  const what = parts.join(' and ');
  const script = path.join(host.root, 'scripts', 'setup-host.sh');
  if (host.canInstall) return { kind: 'setup', what, command: ['bash', script, '--test'] };
  return { kind: 'tell', what, command: `sudo bash ${script} --test` };
}

/**
 * The first of `dirs` (in order) that a process with `uid`/`gid` (no supplementary groups) cannot enter; null
 * when it enters them all. A shell as that user tries `cd` into each: what the kernel lets the agent user do.
 * @param {string[]} dirs @param {number} uid @param {number} gid
 * @returns {string | null}
 */
export function firstClosed(dirs, uid, gid) {
  const r = spawnSync('/bin/sh', ['-c', 'for d; do cd -- "$d" 2>/dev/null || { printf %s "$d"; exit 1; }; done', 'sh', ...dirs], { uid, gid, encoding: 'utf8', timeout: 10_000 });
  if (r.status === 0) return null;
  return r.stdout || dirs[dirs.length - 1] || '/';
}

/**
 * `dir` and every directory above it, from `/` down (pure).
 * @param {string} dir
 * @returns {string[]}
 */
export function ancestry(dir) {
  /** @type {string[]} */
  const out = [];
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    out.unshift(d);
    if (d === path.dirname(d)) return out;
  }
}

/**
 * What to say when the agent user cannot enter the checkout (pure).
 * @param {string} root @param {string} closed
 * @returns {string}
 */
export function closedCheckoutMessage(root, closed) {
  return `computer: the tests run parts of the agent as the \`agent\` user from this checkout (${root}), and ${closed} ` +
    `is closed to that user. Let others pass through it (chmod o+x ${closed}; its listing stays private), or clone the ` +
    'repository under a directory others can enter (e.g. /srv), then run npm test again.';
}

/**
 * The agent user's ids, or null when there is no such user.
 * @returns {{ uid: number, gid: number } | null}
 */
function agentIds() {
  const u = spawnSync('id', ['-u', 'agent'], { encoding: 'utf8' });
  const g = spawnSync('id', ['-g', 'agent'], { encoding: 'utf8' });
  if (u.status !== 0 || g.status !== 0) return null;
  return { uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()) };
}

/**
 * What `setup-host.sh --test --check` says is owed; null (and the reason through `fail`) when it cannot tell.
 * @param {string} root @param {(line: string) => void} fail
 * @returns {Owed | null}
 */
function owedNow(root, fail) {
  const script = path.join(root, 'scripts', 'setup-host.sh');
  const r = spawnSync('bash', [script, '--test', '--check'], { cwd: root, encoding: 'utf8' });
  if (r.status === 0) return parseCheck(r.stdout);
  fail(`computer: ${script} --test --check failed (exit ${r.status}): ${(r.stderr ?? '').trim().slice(0, 300)}`);
  return null;
}

/**
 * The `pretest`. Returns the exit code.
 * @param {{ root: string, say: (line: string) => void, fail: (line: string) => void, canInstall?: boolean }} o
 */
export function prepareTestHost(o) {
  const owed = owedNow(o.root, o.fail);
  if (!owed) return 1;
  const canInstall = o.canInstall ?? (process.getuid?.() === 0 && onPath('apt-get'));
  const step = testHostStep(owed, { root: o.root, canInstall });
  if (step.kind === 'tell') {
    o.fail(`computer: the tests need ${step.what}, which this host lacks; set them up with:\n  ${step.command}\nthen run npm test again.`);
    return 1;
  }
  if (step.kind === 'setup') {
    o.say(`host: setting up ${step.what} for the tests (scripts/setup-host.sh --test; apt-get output follows)`);
    const [cmd, ...args] = step.command;
    const r = spawnSync(/** @type {string} */ (cmd), args, { cwd: o.root, stdio: 'inherit' });
    const after = owedNow(o.root, o.fail);
    if (!after) return 1;
    const still = testHostStep(after, { root: o.root, canInstall: false });
    if (r.status !== 0 || still.kind !== 'none') {
      o.fail(`computer: setting up the host for the tests failed (${still.kind === 'none' ? `exit ${r.status}` : `still missing ${still.what}`}); run it by hand:\n  sudo bash ${path.join(o.root, 'scripts', 'setup-host.sh')} --test`);
      return 1;
    }
  }
  const ids = agentIds();
  const closed = ids && process.getuid?.() === 0 ? firstClosed(ancestry(o.root), ids.uid, ids.gid) : null;
  if (closed) {
    o.fail(closedCheckoutMessage(o.root, closed));
    return 1;
  }
  return ensure({ root: o.root, say: o.say, fail: o.fail });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  process.exit(prepareTestHost({ root, say: (l) => process.stdout.write(`${l}\n`), fail: (l) => process.stderr.write(`${l}\n`) }));
}
