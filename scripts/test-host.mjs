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
 * The checkout may be anywhere, under /root (0700) too: what the agent's tests run as the `agent` user (the spawn
 * helper, the files worker) is built outside it (agent/src/spawn/dev-libexec.ts).
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
  return ensure({ root: o.root, say: o.say, fail: o.fail });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  process.exit(prepareTestHost({ root, say: (l) => process.stdout.write(`${l}\n`), fail: (l) => process.stderr.write(`${l}\n`) }));
}
