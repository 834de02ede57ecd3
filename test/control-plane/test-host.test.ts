/**
 * `npm test` on a fresh host (issue 21 item 5): its `pretest` (scripts/test-host.mjs) sets up what the suite
 * needs, like `npm start`: which step is owed (the decision, pure), what setup-host.sh --check reports, and the
 * pretest against a stand-in repository whose setup-host.sh reports what a fresh host owes.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseCheck, prepareTestHost, testHostStep } from '../../scripts/test-host.mjs';

const repo = fileURLToPath(new URL('../..', import.meta.url));

t.test('which step npm test owes', async (t) => {
  const nothing = { packages: [], agentUser: false };
  t.same(testHostStep(nothing, { root: '/srv/computer', canInstall: true }), { kind: 'none' });
  t.same(testHostStep(nothing, { root: '/srv/computer', canInstall: false }), { kind: 'none' });
  t.same(testHostStep({ packages: [], agentUser: true }, { root: '/srv/computer', canInstall: true }), {
    kind: 'setup', what: 'the `agent` user', command: ['bash', '/srv/computer/scripts/setup-host.sh', '--test'],
  });
  t.same(testHostStep({ packages: ['podman', 'xvfb'], agentUser: true }, { root: '/srv/computer', canInstall: false }), {
    kind: 'tell', what: 'system packages (podman, xvfb) and the `agent` user', command: 'sudo bash /srv/computer/scripts/setup-host.sh --test',
  });
  t.same(testHostStep({ packages: ['chromium'], agentUser: false }, { root: '/srv/computer', canInstall: false }), {
    kind: 'tell', what: 'system packages (chromium)', command: 'sudo bash /srv/computer/scripts/setup-host.sh --test',
  });
});

t.test("setup-host.sh --check's report", async (t) => {
  t.same(parseCheck(''), { packages: [], agentUser: false });
  t.same(parseCheck('missing-packages: podman runc xvfb\nmissing-user: agent\n'), { packages: ['podman', 'runc', 'xvfb'], agentUser: true });
  t.same(parseCheck('missing-user: agent\nsomething else\nmissing-packages: g++ $(rm)\n'), { packages: ['g++'], agentUser: true });
  // This host ran setup-host.sh --test: nothing owed, and --check changes nothing.
  const r = spawnSync('bash', [path.join(repo, 'scripts', 'setup-host.sh'), '--test', '--check'], { encoding: 'utf8' });
  t.equal(r.status, 0);
  t.equal(r.stdout, '');
  const bad = spawnSync('bash', [path.join(repo, 'scripts', 'setup-host.sh'), '--nope'], { encoding: 'utf8' });
  t.equal(bad.status, 2, 'an unknown option installs nothing');
});

/**
 * A repository whose setup-host.sh reports `owed` until it is run without --check (then nothing); each call is
 * appended to `calls`. node_modules and package-lock.json are the real ones (the native modules load).
 */
function standIn(t: { teardown(fn: () => void): void }, owed: string, parent = os.tmpdir()): { root: string; calls: () => string[] } {
  const root = fs.mkdtempSync(path.join(parent, 'test-host-'));
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
  fs.mkdirSync(path.join(root, 'scripts'));
  fs.symlinkSync(fs.realpathSync(path.join(repo, 'node_modules')), path.join(root, 'node_modules'));
  fs.copyFileSync(path.join(repo, 'package-lock.json'), path.join(root, 'package-lock.json'));
  const dir = path.join(root, 'scripts');
  fs.writeFileSync(
    path.join(dir, 'setup-host.sh'),
    [
      'echo "$*" >> "$(dirname "$0")/calls"',
      'if [ "${2:-}" = --check ]; then [ -e "$(dirname "$0")/done" ] || printf \'%s\\n\' "$OWED"; exit 0; fi',
      'echo "setup-host: ok"; touch "$(dirname "$0")/done"',
      '',
    ].join('\n'),
  );
  process.env.OWED = owed;
  t.teardown(() => delete process.env.OWED);
  return { root, calls: () => fs.readFileSync(path.join(dir, 'calls'), 'utf8').trim().split('\n') };
}

t.test('the pretest on a host that owes the agent user', async (t) => {
  await t.test('not root: the one command, and the tests stop', async (t) => {
    const s = standIn(t, 'missing-user: agent');
    const said: string[] = [];
    const failed: string[] = [];
    t.equal(prepareTestHost({ root: s.root, say: (l) => said.push(l), fail: (l) => failed.push(l), canInstall: false }), 1);
    t.same(failed, [
      `computer: the tests need the \`agent\` user, which this host lacks; set them up with:\n  sudo bash ${s.root}/scripts/setup-host.sh --test\nthen run npm test again.`,
    ]);
    t.same(said, []);
    t.same(s.calls(), ['--test --check'], 'nothing installed');
  });
  await t.test('root with apt-get: setup-host.sh --test runs, then the tests go on', async (t) => {
    const s = standIn(t, 'missing-packages: xvfb\nmissing-user: agent');
    const said: string[] = [];
    const failed: string[] = [];
    t.equal(prepareTestHost({ root: s.root, say: (l) => said.push(l), fail: (l) => failed.push(l), canInstall: true }), 0);
    t.same(said, ['host: setting up system packages (xvfb) and the `agent` user for the tests (scripts/setup-host.sh --test; apt-get output follows)']);
    t.same(failed, []);
    t.same(s.calls(), ['--test --check', '--test', '--test --check']);
  });
  await t.test('nothing owed: nothing said, nothing run', async (t) => {
    const s = standIn(t, '');
    const said: string[] = [];
    t.equal(prepareTestHost({ root: s.root, say: (l) => said.push(l), fail: (l) => said.push(l), canInstall: true }), 0);
    t.same(said, []);
    t.same(s.calls(), ['--test --check']);
  });
});

t.test('a checkout under a directory closed to others goes on (what the agent user runs is built outside it)', async (t) => {
  // A real 0700 directory above a stand-in checkout, as /root is (issue 21: the checkout may live there).
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'test-host-home-'));
  t.teardown(() => fs.rmSync(home, { recursive: true, force: true }));
  t.equal(fs.statSync(home).mode & 0o777, 0o700);
  const s = standIn(t, '', home);
  const said: string[] = [];
  t.equal(prepareTestHost({ root: s.root, say: (l) => said.push(l), fail: (l) => said.push(l), canInstall: true }), 0);
  t.same(said, [], 'nothing refused, nothing said');
  t.equal(fs.statSync(home).mode & 0o777, 0o700, 'the directory is not widened');
});
