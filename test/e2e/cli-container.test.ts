/**
 * The `computer` CLI end to end: the built JavaScript run as a process (under a real pty from node-pty where
 * a terminal matters) against the real control plane on 127.0.0.1 with the container substrate and the
 * real guest image. One machine for the whole file: login writes a 0600 config, machines ls --json, exec's
 * exit status passed through, cp both ways byte-exact, `computer shell` (echo, resize seen by `stty size`,
 * exit status, local terminal restored), screenshot, snapshots create/ls, fork, restore, ports publish/ls/rm,
 * secrets set/ls/rm (the value reaching a login shell, never printed), an error envelope rendered. Needs root,
 * podman and runc.
 */
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import type * as NodePty from 'node-pty';
import { buildCli } from '../helpers/cli-build.js';
import { serveOnContainers } from '../helpers/container-served.js';
import { displayUp } from '../helpers/machines-rig.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

const pty = createRequire(import.meta.url)('node-pty') as typeof NodePty;

/** A process under a pty: everything it printed so far, waits on it, and its exit status. */
class PtyRun {
  out = '';
  readonly exited: Promise<number>;
  private waiters: Array<() => void> = [];
  constructor(readonly p: NodePty.IPty) {
    p.onData((d) => {
      this.out += d;
      for (const w of this.waiters.splice(0)) w();
    });
    this.exited = new Promise((r) => p.onExit(({ exitCode }) => r(exitCode)));
  }
  /** Resolves when `text` has been printed after position `from`; a hang guard rejects (not a timing check). */
  waitFor(text: string | RegExp, from = 0, ms = 60_000): Promise<void> {
    const seen = () => (typeof text === 'string' ? this.out.indexOf(text, from) >= 0 : text.test(this.out.slice(from)));
    return new Promise((resolve, reject) => {
      const guard = setTimeout(() => reject(new Error(`timed out waiting for ${text}; got ${JSON.stringify(this.out.slice(-400))}`)), ms);
      const check = () => {
        if (seen()) {
          clearTimeout(guard);
          resolve();
        } else this.waiters.push(check);
      };
      check();
    });
  }
}

t.test('computer CLI end to end on the container substrate', { timeout: 1_200_000 }, async (t) => {
  const { rig, served, created } = await serveOnContainers(t, 'cli-');
  const main = buildCli(t);
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-home-'));
  t.teardown(() => fs.rmSync(home, { recursive: true, force: true }));
  const cfgHome = path.join(home, 'cfg');
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, XDG_CONFIG_HOME: cfgHome, COMPUTER_BASE_URL: `http://127.0.0.1:${served.port}`, TERM: 'xterm-256color', LANG: 'C.UTF-8' };

  const underPty = (file: string, args: string[], o: { cols?: number; rows?: number } = {}) =>
    new PtyRun(pty.spawn(file, args, { name: 'xterm-256color', cols: o.cols ?? 80, rows: o.rows ?? 24, cwd: home, env }));
  /** Pipes, not a pty: stdout and stderr apart (async: the server runs in this process). */
  const piped = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [main, ...args], { env, cwd: home, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: number }).code ?? -1) : 0, stdout, stderr });
      });
    });

  /** As `piped`, with `input` on stdin. */
  const pipedWithInput = (args: string[], input: string) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(process.execPath, [main, ...args], { env, cwd: home }, (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: number }).code ?? -1) : 0, stdout, stderr });
      });
      child.stdin!.end(input);
    });

  const a = await rig.tenant('developer', ['machines:read', 'machines:write', 'machines:control', 'sessions:write', 'snapshots:read', 'snapshots:write', 'ports:read', 'ports:write', 'secrets:write']);

  // --- login: the key typed at a hidden prompt, stored 0600 in a 0700 directory -----------------
  const login = underPty(process.execPath, [main, 'login']);
  await login.waitFor('API key: ');
  login.p.write(`${a.key}\r`);
  t.equal(await login.exited, 0, 'login exits 0');
  t.notOk(login.out.includes(a.key), 'the key is not echoed');
  const cfgFile = path.join(cfgHome, 'computer', 'config.json');
  t.equal(fs.statSync(cfgFile).mode & 0o777, 0o600, 'config file 0600');
  t.equal(fs.statSync(path.dirname(cfgFile)).mode & 0o777, 0o700, 'config dir 0700');
  t.same(JSON.parse(fs.readFileSync(cfgFile, 'utf8')), { base_url: `http://127.0.0.1:${served.port}`, api_key: a.key });

  const bad = await piped(['login', '--api-key', 'sk_not_a_real_key']);
  t.equal(bad.code, 1, 'a refused key fails login');
  t.match(bad.stderr, /unauthenticated, HTTP 401/);
  t.equal(JSON.parse(fs.readFileSync(cfgFile, 'utf8')).api_key, a.key, 'and is not stored');

  // --- machines ---------------------------------------------------------------------------------
  const mk = await piped(['machines', 'create', '--name', 'cli-e2e']);
  t.equal(mk.code, 0, mk.stderr);
  const id = mk.stdout.trim();
  t.match(id, /^mch_[a-z0-9]{24}$/, 'create prints the id');
  created.push(id);
  await displayUp(rig, a.key, id);
  const ls = await piped(['machines', 'ls', '--json']);
  t.equal(ls.code, 0);
  const listed = JSON.parse(ls.stdout) as Array<{ id: string; name: string; state: string }>;
  t.same(listed.map((m) => [m.id, m.name, m.state]), [[id, 'cli-e2e', 'running']], 'machines ls --json');
  const table = await piped(['machines', 'ls']);
  t.match(table.stdout, new RegExp(`^ID +NAME +STATE +SIZE +CREATED\\n${id}  cli-e2e +running +small `), 'machines ls table');

  // --- exec: output through, exit status through ------------------------------------------------
  const ex = await piped(['exec', 'cli-e2e', '--', 'sh', '-c', 'echo to-out; echo to-err >&2; exit 7']);
  t.equal(ex.code, 7, 'the remote exit status is passed through');
  t.equal(ex.stdout, 'to-out\n');
  t.equal(ex.stderr, 'to-err\n');
  t.equal((await piped(['exec', id, '--', 'true'])).code, 0);

  // --- cp both ways, byte-exact; 5 MiB + 17 crosses the 4 MiB upload chunk ----------------------
  const blob = crypto.randomBytes(5 * 1024 * 1024 + 17);
  fs.writeFileSync(path.join(home, 'up.bin'), blob);
  const up = underPty(process.execPath, [main, 'cp', 'up.bin', `${id}:/home/agent/up.bin`]);
  t.equal(await up.exited, 0, 'upload');
  t.match(up.out, /up\.bin \[#{30}\] 100% 5\.0 MiB \/ 5\.0 MiB/, 'a progress bar on the terminal');
  const sum = await piped(['exec', id, '--', 'sha256sum', '/home/agent/up.bin']);
  t.equal(sum.stdout.split(' ')[0], crypto.createHash('sha256').update(blob).digest('hex'), 'the guest holds the same bytes');
  const down = await piped(['cp', `${id}:/home/agent/up.bin`, 'down.bin']);
  t.equal(down.code, 0, down.stderr);
  t.equal(down.stderr, '', 'no progress bar when stderr is not a terminal');
  t.ok(fs.readFileSync(path.join(home, 'down.bin')).equals(blob), 'download byte-exact');
  const empty = path.join(home, 'empty');
  fs.writeFileSync(empty, '');
  t.equal((await piped(['cp', 'empty', `${id}:/tmp/empty`])).code, 0);
  t.equal((await piped(['exec', id, '--', 'stat', '-c', '%s', '/tmp/empty'])).stdout, '0\n', 'an empty file arrives empty');

  // --- shell: a real pty both ends --------------------------------------------------------------
  // The wrapper shows that computer put the local terminal back (stty -g before == after) and its status.
  const sh = underPty('/bin/sh', ['-c', `S1=$(stty -g); "${process.execPath}" "${main}" shell ${id}; rc=$?; S2=$(stty -g); [ "$S1" = "$S2" ] && echo TERMINAL-RESTORED; echo RC=$rc`]);
  sh.p.write('echo A$((6*7))B\r');
  await sh.waitFor('A42B');
  let mark = sh.out.length;
  sh.p.write('stty size\r');
  await sh.waitFor('24 80', mark);
  sh.p.resize(100, 30);
  // The resize and the typed command travel on different paths to the pty, so ask until it shows.
  let resized = false;
  for (let i = 0; i < 40 && !resized; i++) {
    mark = sh.out.length;
    sh.p.write('stty size\r');
    await sh.waitFor(/\d+ \d+\r*\n/, mark);
    resized = sh.out.slice(mark).includes('30 100');
    if (!resized) await new Promise((r) => setTimeout(r, 250));
  }
  t.ok(resized, 'SIGWINCH resized the remote pty to 100x30');
  sh.p.write('exit 3\r');
  await sh.waitFor('RC=3');
  t.equal(await sh.exited, 0);
  t.match(sh.out, /TERMINAL-RESTORED\r?\nRC=3/, 'terminal restored, the remote exit status passed through');

  // --- screenshot, snapshots, fork, restore -----------------------------------------------------
  const shot = await piped(['screenshot', id, '-o', 'shot.png']);
  t.equal(shot.code, 0, shot.stderr);
  t.same([...fs.readFileSync(path.join(home, 'shot.png')).subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'screenshot -o x.png writes a PNG');
  const writeMark = (text: string) => piped(['exec', id, '--', 'sh', '-c', `echo ${text} > /home/agent/mark.txt && sync`]);
  const markOf = async (m: string) => (await piped(['exec', m, '--', 'cat', '/home/agent/mark.txt'])).stdout;
  t.equal((await writeMark('before')).code, 0);
  const snap = await piped(['snapshots', 'create', id, '--name', 'cli-snap']);
  t.equal(snap.code, 0, snap.stderr);
  const snapId = snap.stdout.trim();
  t.match(snapId, /^snp_[a-z0-9]{24}$/, 'snapshots create waits and prints the id');
  const snaps = JSON.parse((await piped(['snapshots', 'ls', '--machine', id, '--json'])).stdout) as Array<{ id: string; name: string; state: string }>;
  t.same(snaps.map((s) => [s.id, s.name, s.state]), [[snapId, 'cli-snap', 'ready']], 'snapshots ls --json');
  t.equal((await writeMark('after')).code, 0);
  const fork = await piped(['fork', id, '--snapshot', snapId, '--name', 'cli-fork']);
  t.equal(fork.code, 0, fork.stderr);
  const forkId = fork.stdout.trim();
  t.match(forkId, /^mch_[a-z0-9]{24}$/, 'fork prints the new machine id');
  created.push(forkId);
  await displayUp(rig, a.key, forkId);
  t.equal(await markOf(forkId), 'before\n', "the fork starts from the snapshot's disk");
  t.equal(await markOf(id), 'after\n', 'the parent is unchanged');
  const restore = await piped(['restore', id, snapId]);
  t.equal(restore.code, 0, restore.stderr);
  await displayUp(rig, a.key, id);
  t.equal(await markOf(id), 'before\n', 'restore put the disk back');
  const after = JSON.parse((await piped(['snapshots', 'ls', '--machine', id, '--json'])).stdout) as Array<{ name: string }>;
  t.same(after.map((s) => s.name).sort(), ['Before restore', 'cli-snap'], 'the disk before the restore is kept');
  t.equal((await piped(['machines', 'rm', forkId])).code, 0);

  // --- ports and secrets ------------------------------------------------------------------------
  const pub = await piped(['ports', 'publish', id, '8000', '--json']);
  t.equal(pub.code, 0, pub.stderr);
  const preview = JSON.parse(pub.stdout) as { id: string; port: number };
  t.equal(preview.port, 8000);
  t.same((JSON.parse((await piped(['ports', 'ls', id, '--json'])).stdout) as Array<{ id: string }>).map((p) => p.id), [preview.id], 'ports ls');
  t.equal((await piped(['ports', 'rm', id, preview.id])).code, 0);
  t.same(JSON.parse((await piped(['ports', 'ls', id, '--json'])).stdout), [], 'unpublished');

  const SECRET = 'cli-secret-value-' + crypto.randomBytes(6).toString('hex');
  const set = await pipedWithInput(['secrets', 'set', id, 'CLI_TOKEN'], `${SECRET}\n`);
  t.equal(set.code, 0, set.stderr);
  const names = await piped(['secrets', 'ls', id, '--json']);
  t.match(names.stdout, 'CLI_TOKEN');
  t.notOk(names.stdout.includes(SECRET) || set.stdout.includes(SECRET), 'the value is never printed');
  const seen = await piped(['exec', id, '--', 'bash', '-lc', 'printf %s "$CLI_TOKEN"']);
  t.equal(seen.stdout, SECRET, 'a login shell in the machine has it (the trailing newline of stdin is not part of it)');
  t.equal((await piped(['secrets', 'rm', id, 'CLI_TOKEN'])).code, 0);
  t.notMatch((await piped(['secrets', 'ls', id, '--json'])).stdout, 'CLI_TOKEN', 'removed');

  // --- an error envelope rendered ---------------------------------------------------------------
  const nf = await piped(['exec', 'mch_000000000000000000000000', '--', 'true']);
  t.equal(nf.code, 1);
  t.match(nf.stderr, /^error: .+ \(not_found, HTTP 404\)\n  request id: req_[a-z0-9]+\n$/, 'code, status and request id');
  const byName = await piped(['machines', 'stop', 'no-such-machine']);
  t.equal(byName.code, 1);
  t.equal(byName.stderr, 'error: No machine is named no-such-machine. (not_found, HTTP 404)\n');
  const usage = await piped(['exec', id]);
  t.equal(usage.code, 2, 'a bad command line exits 2');
  t.match(usage.stderr, /^error: give the command after --\nusage: exec MACHINE/);

  const rm = await piped(['machines', 'rm', id]);
  t.equal(rm.code, 0, rm.stderr);
  t.equal(rm.stdout, `deleted ${id}\n`);
  t.same(JSON.parse((await piped(['machines', 'ls', '--json'])).stdout), []);
});
