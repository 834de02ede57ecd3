/**
 * Issue #10 item 2: root from the unprivileged user through inherited pty masters.
 *
 * node-pty opens terminal masters without close-on-exec, so before the fix every process the agent
 * started later (exec, other terminals, Chromium) inherited the masters of the open root terminals,
 * and an `agent`-user process wrote a command into a root shell. Attack from inside a real container
 * machine: with root terminals open, exec, terminals and the browser must see no fd beyond 0-2, no
 * `agent`-user process may hold a pty master, and writing into any inherited master must not reach
 * the root shell.
 */
import t from 'tap';
import fs from 'node:fs';
import { containerMachineRig } from '../helpers/container-machine.js';
import { until } from '../helpers/machines-rig.js';

t.test('no agent fd reaches exec, terminals or the browser', { timeout: 900_000 }, async (t) => {
  const m = await containerMachineRig(t);
  const id = await m.machine('fds');
  const base = `/v1/machines/${id}`;
  const key = m.tenant.key;

  // Two root terminals (interactive login shells) that an attacker would like to type into.
  for (let i = 0; i < 2; i++) {
    const r = await m.rig.call('POST', `${base}/terminals`, { key, body: { user: 'root' } });
    t.equal(r.status, 200, `root terminal ${i} opened`);
  }

  // The shell's own fds, listed by a child: `; true` keeps the shell from exec'ing ls in its place,
  // and no pipeline (the shell would hold the pipe's fds while ls looks).
  const ownFds = ['sh', '-c', 'ls /proc/$$/fd; true'];
  for (const user of ['agent', 'root'] as const) {
    const r = await m.exec(id, ownFds, { user });
    t.equal(r.stdout, '0\n1\n2\n', `exec as ${user} has only fds 0-2`);
  }

  for (const user of ['agent', 'root'] as const) {
    const out = `/tmp/term-fds-${user}`;
    const r = await m.rig.call('POST', `${base}/terminals`, {
      // A child lists the terminal's shell ($PPID): the shell itself holds no redirection while it waits.
      key, body: { user, command: ['sh', '-c', `sh -c "ls /proc/\\$PPID/fd > ${out}.tmp && mv ${out}.tmp ${out}"; exec sleep 600`] },
    });
    t.equal(r.status, 200, `${user} terminal opened`);
    const fds = await until(`${user} terminal output`, 60, async () => {
      const c = await m.exec(id, ['cat', out], { user: 'root' });
      return c.exit_code === 0 ? c.stdout : null;
    });
    t.equal(fds, '0\n1\n2\n', `a ${user} terminal has only fds 0-2`);
  }

  // The browser, launched through the browser-open route (it needs a session holding the lease).
  const session = await m.rig.call('POST', '/v1/sessions', { key, body: { machine_id: id, type: 'agent' } });
  const lease = await m.rig.call('POST', `${base}/input-lease`, { key, body: { session_id: session.json.id, ttl_seconds: 300 } });
  const open = await m.rig.call('POST', `${base}/browser/open`, {
    key, body: { url: 'about:blank' }, headers: { 'x-session-id': session.json.id, 'x-lease-fence': String(lease.json.fence) },
  });
  t.equal(open.status, 200, 'browser opened');
  // Chromium's processes are not dumpable, so guest root cannot list their fds; the host can.
  const chromium = await until('chromium processes', 120, async () => {
    const ps = m.hostProcesses(id).filter((p) => p.cmdline.startsWith('/usr/lib/chromium/'));
    return ps.length >= 3 ? ps : null;
  });
  const links: string[] = [];
  for (const p of chromium) {
    for (const fd of fs.readdirSync(`/proc/${p.pid}/fd`)) {
      try {
        links.push(fs.readlinkSync(`/proc/${p.pid}/fd/${fd}`));
      } catch {
        /* closed meanwhile */
      }
    }
  }
  t.ok(links.some((l) => l.startsWith('socket:')), "Chromium's own fds are listed");
  t.same(links.filter((l) => /ptmx|^\/dev\/pts\//.test(l)), [], "Chromium's processes hold no pty master and no terminal");

  // Only the agent itself may hold pty masters: no other process of the machine (Chromium, openbox,
  // the shells, their children), whatever its user. Seen from the host, which can read every fd table.
  const holders: string[] = [];
  for (const p of m.hostProcesses(id)) {
    if (p.cmdline.includes('/opt/computer/dist/agent/src/main.js')) continue;
    let fds: string[] = [];
    try {
      fds = fs.readdirSync(`/proc/${p.pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (/ptmx$/.test(fs.readlinkSync(`/proc/${p.pid}/fd/${fd}`))) holders.push(p.cmdline);
      } catch {
        /* closed meanwhile */
      }
    }
  }
  t.same(holders, [], 'no process but the agent holds a pty master');

  // The attack itself: an agent-user process writes a command into every pty master it inherited.
  const attack = await m.exec(id, [
    'bash', '-c',
    'for f in /proc/$$/fd/*; do n=${f##*/}; case "$(readlink "$f")" in *ptmx) echo "$n"; echo "touch /tmp/pwned-by-agent" >&$n;; esac; done; true',
  ]);
  t.equal(attack.stdout, '', 'the agent user inherited no pty master to write into');
  // Had a write landed, the root shell would run it within milliseconds; give it a generous moment.
  await new Promise((r) => setTimeout(r, 1000));
  const pwned = await m.exec(id, ['test', '-e', '/tmp/pwned-by-agent'], { user: 'root' });
  t.equal(pwned.exit_code, 1, 'no root shell ran the injected command');
});
