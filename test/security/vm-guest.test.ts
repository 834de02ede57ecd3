/**
 * Issue 10 items 2, 4 and 9 on the vm substrate: the same attacks as guest-fd-leak.test.ts and
 * files-as-user.test.ts, from inside a real QEMU machine (its own kernel; guest root has every
 * capability there, CAP_SYS_PTRACE included, so it can read every process's fd table itself), plus
 * that no credential the agent accepts is at rest in a VM (item 9: no fw_cfg token any more).
 */
import t from 'tap';
import { until } from '../helpers/machines-rig.js';
import { vmMachinesRig } from '../helpers/substrate-rigs.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

const q = encodeURIComponent;

t.test('vm guest: no inherited pty masters, files as the agent user, no credential at rest', { timeout: 1_500_000 }, async (t) => {
  const { rig, created } = await vmMachinesRig(t);
  const a = await rig.tenant('developer');
  const { key: readOnly } = await rig.key(a.cookie, ['machines:read']);
  const c = await rig.call('POST', '/v1/machines', { key: a.key, body: { name: 'vm-sec' } });
  t.equal(c.status, 201);
  created.push(c.json.id);
  const base = `/v1/machines/${c.json.id}`;
  const exec = async (command: string[], user: 'agent' | 'root' = 'agent') => {
    const r = await rig.call('POST', `${base}/exec`, { key: a.key, body: { command, user, timeout_ms: 60_000 } });
    return r.status === 200 ? (r.json as { stdout: string; exit_code: number }) : null;
  };
  await until('the agent', 600, () => exec(['true']));

  // Item 2: root terminals open, then exec and every process of the machine but the agent.
  for (let i = 0; i < 2; i++) t.equal((await rig.call('POST', `${base}/terminals`, { key: a.key, body: { user: 'root' } })).status, 200);
  t.equal((await exec(['sh', '-c', 'ls /proc/$$/fd; true']))!.stdout, '0\n1\n2\n', 'exec as agent: only fds 0-2');
  const session = await rig.call('POST', '/v1/sessions', { key: a.key, body: { machine_id: c.json.id, type: 'agent' } });
  const lease = await rig.call('POST', `${base}/input-lease`, { key: a.key, body: { session_id: session.json.id } });
  const open = await rig.call('POST', `${base}/browser/open`, {
    key: a.key, body: { url: 'about:blank' }, headers: { 'x-session-id': session.json.id, 'x-lease-fence': String(lease.json.fence) },
  });
  t.equal(open.status, 200, 'browser opened');
  await until('chromium', 240, async () => ((await exec(['pgrep', '-f', '/usr/lib/chromium/']))?.exit_code === 0 ? true : null));
  const agentPid = (await exec(['pgrep', '-f', '/opt/computer/dist/agent/src/main.js'], 'root'))!.stdout.trim().split('\n')[0];
  const holders = await exec(['sh', '-c', `for p in /proc/[0-9]*; do [ "\${p#/proc/}" = "${agentPid}" ] && continue; ls -l $p/fd 2>/dev/null | grep -q ptmx && cat $p/comm; done; true`], 'root');
  t.equal(holders!.stdout, '', 'no process but the agent holds a pty master (Chromium included)');

  // Item 4: reads act as the agent user; root needs control; process views are denied.
  const shadow = await rig.call('GET', `${base}/files/content?path=${q('/etc/shadow')}`, { key: readOnly });
  t.equal(shadow.status, 403, 'a read-only key cannot read /etc/shadow');
  t.equal((await rig.call('GET', `${base}/files/content?path=${q('/etc/shadow')}&user=root`, { key: readOnly })).status, 403, 'nor as root');
  t.equal((await rig.call('GET', `${base}/files/content?path=${q('/etc/shadow')}&user=root`, { key: a.key })).status, 200, 'a control key can, as root');
  const mem = await rig.call('GET', `${base}/files/content?path=${q('/proc/1/mem')}&user=root`, { key: a.key });
  t.equal(mem.status, 403, '/proc/1/mem is 403 even as root');

  // Item 9: no credential the agent accepts is at rest in the VM: no fw_cfg entry, the key in no file,
  // environment or command line (the pattern bracketing one character, so the sweep does not find itself).
  const key = (await rig.store.db.q().selectFrom('machines').select('agent_token').where('id', '=', c.json.id).executeTakeFirstOrThrow()).agent_token;
  const pattern = `${key[0]}[${key[1]}]${key.slice(2)}`;
  const sweep = `ls /sys/firmware/qemu_fw_cfg/by_name/opt 2>/dev/null; echo ---; grep -rlsE -- '${pattern}' /run /etc /tmp /root /home /opt/computer /proc/[0-9]*/environ /proc/[0-9]*/cmdline; echo ---`;
  t.equal((await exec(['sh', '-c', sweep], 'root'))!.stdout, '---\n---\n', 'no fw_cfg entry, and the key nowhere');
  // Guest root kills the agent; the init restarts it, and the control plane enrolls the new process over the
  // channel (the first enrollment on the host-only port) before it serves again.
  const killed = await rig.call('POST', `${base}/exec`, { key: a.key, body: { command: ['sh', '-c', 'kill -9 "$(cat /run/computer/agent.pid)"'], user: 'root' } });
  t.ok([200, 503].includes(killed.status), `the exec that kills the agent may or may not be answered (${killed.status})`);
  t.equal((await until('the restarted agent', 120, () => exec(['echo', 'back'])))!.stdout, 'back\n', 'served again after re-enrollment');
  t.equal((await exec(['sh', '-c', sweep], 'root'))!.stdout, '---\n---\n', 'and still nothing at rest');
});
