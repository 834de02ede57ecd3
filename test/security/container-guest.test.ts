/**
 * Attacks from inside one real container machine (issue #10), one machine reused by every subtest.
 *
 * Item 3, host socket redirection. A container's channel directory is bind-mounted into the guest,
 * so guest root can replace the agent's socket with a symlink to any host unix socket; the control plane
 * (host root) dials the channel with the machine token and request bodies. It must dial only the socket the
 * agent made there: a link is refused with a clean compute_unavailable and the host socket sees nothing.
 *
 * Item 9, guest credentials. Guest root could read the agent token from the channel directory. Now nothing the
 * agent accepts is at rest in the guest: the key lives in the agent's memory, handed over once per agent
 * process with a one-time secret that the agent consumes (agent/src/enrollment.ts).
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { containerName, globalArgs, podmanEnv } from '../../control-plane/src/substrate/container/podman-argv.js';
import { containerRig } from '../helpers/container-guest.js';
import { H2Client } from '../helpers/h2-client.js';
import { waitForAgent } from '../helpers/substrate-image.js';

const run = promisify(execFile);
t.setTimeout(900_000);

const { sub, root, guest } = await containerRig(t);
// The machine's agent key, as the control plane holds it (its database; never in the guest).
const token = crypto.randomBytes(24).toString('hex');
await sub.create({ id: 'mch_sock1', resources: { vcpu: 1, memory_mb: 512, disk_gb: 1 }, source: { kind: 'base' } });
const ready = await waitForAgent(sub, 'mch_sock1', token, 120_000);
ready.client.session.destroy();

t.test('item 1: guest root has no raw sockets, device nodes or audit writes', async (t) => {
  const caps = await guest('mch_sock1', "grep -E '^Cap(Eff|Bnd):' /proc/self/status");
  // CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE SYS_CHROOT SETFCAP
  t.equal(caps.out, 'CapEff:\t00000000800405fb\nCapBnd:\t00000000800405fb\n', 'exactly the kept capabilities, in the bounding set too');
  const raw = await guest('mch_sock1', `python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))' 2>&1; python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)' 2>&1`);
  t.equal(raw.out.match(/PermissionError: \[Errno 1\] Operation not permitted/g)?.length, 2, 'packet and raw IP sockets are refused');
  const mknod = await guest('mch_sock1', 'mknod /tmp/sda b 8 0 2>&1');
  t.not(mknod.code, 0, 'mknod is refused');
});

t.test('item 10: guest files name neither the machine, the container nor host paths', async (t) => {
  const rec = JSON.parse(fs.readFileSync(path.join(root, 'machines', 'mch_sock1', 'machine.json'), 'utf8')) as { ctrId: string };
  const files = await guest('mch_sock1', 'cat /etc/hosts /etc/hostname /proc/self/cgroup /proc/1/cgroup; tr "\\0" "\\n" < /proc/1/environ; env');
  t.equal(files.code, 0);
  t.notMatch(files.out, 'mch_sock1', 'no machine id');
  t.notMatch(files.out, rec.ctrId.slice(0, 12), 'no podman container id');
  t.notMatch(files.out, root, 'no substrate root');
  t.notMatch(files.out, sub.reachDir, 'no reach dir');
  t.notMatch(files.out, 'host.containers.internal', 'no podman-written hosts entries');
  t.match(files.out, /^127\.0\.0\.1\s+localhost$/m, 'localhost still resolves');
  t.match(files.out, /^0::\/$/m, 'a private cgroup namespace');
});

t.test('item 9: no credential the agent accepts is at rest in the guest, even across agent restarts', async (t) => {
  // What guest root can find: the channel directory, every process's environment and command line, and the
  // places a credential could be written (the agent's own files, /run, /etc, /tmp, home directories).
  // The pattern is the key with one character in brackets, so the sweep's own command line does not match.
  const pattern = `${token[0]}[${token[1]}]${token.slice(2)}`;
  const sweep = `ls -A /run/computer-channel; echo ---; grep -rlsE -- '${pattern}' /run /etc /tmp /root /home /opt/computer /proc/[0-9]*/environ /proc/[0-9]*/cmdline; echo ---`;
  const before = await guest('mch_sock1', sweep);
  t.equal(before.out, 'agent.sock\n---\n---\n', 'only the socket in the channel directory, and the key nowhere');

  // Guest root kills the agent; the init restarts it, and the new process holds no key.
  const killed = await guest('mch_sock1', 'kill -9 "$(cat /run/computer/agent.pid)"');
  t.equal(killed.code, 0);
  let fresh = 0;
  for (let i = 0; i < 100 && fresh !== 401; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const c = new H2Client(sub.channelPath('mch_sock1'), token);
    fresh = await c.request('GET', '/health').then((r) => r.status, () => 0);
    c.session.destroy();
  }
  t.equal(fresh, 401, 'the restarted agent does not accept the key it was never given');
  // The host enrolls it again with a fresh one-time secret (what AgentPool does), and it serves again.
  const again = await waitForAgent(sub, 'mch_sock1', token, 60_000);
  again.client.session.destroy();
  t.equal((await guest('mch_sock1', sweep)).out, 'agent.sock\n---\n---\n', 'after the re-enrollment, the secret is consumed and the key still nowhere');
});

t.test('item 3: guest root cannot point the host at a host socket', async (t) => {
  const ok = await sub.openChannel('mch_sock1');
  t.pass('the agent socket itself is dialled');
  ok.destroy();

  // A host service the guest wants the host to talk to (in a host-only directory).
  const trapDir = fs.mkdtempSync(path.join(os.tmpdir(), 'trap-'));
  const trapPath = path.join(trapDir, 'host.sock');
  const received: Buffer[] = [];
  const sockets: net.Socket[] = [];
  const trap = net.createServer((s) => {
    sockets.push(s);
    s.on('data', (d) => received.push(d));
  });
  await new Promise<void>((r) => trap.listen(trapPath, () => r()));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    trap.close();
    fs.rmSync(trapDir, { recursive: true, force: true });
  });

  const dial = () =>
    sub.openChannel('mch_sock1').then(
      (s) => {
        s.write(`Bearer ${token}`);
        s.destroy();
        return 'connected';
      },
      (e: { code?: string }) => e.code,
    );
  for (const [what, script] of [
    ['a symlink to the host socket', `rm -f /run/computer-channel/agent.sock && ln -s ${trapPath} /run/computer-channel/agent.sock`],
    ['a relative symlink climbing out', `rm -f /run/computer-channel/agent.sock && ln -s ../../../../../../../../..${trapPath} /run/computer-channel/agent.sock`],
  ] as const) {
    const r = await guest('mch_sock1', `${script} && ls -l /run/computer-channel/agent.sock`);
    t.equal(r.code, 0, `guest root made ${what}`);
    t.equal(await dial(), 'compute_unavailable', `${what}: the host refuses to dial it`);
  }
  // A regular file or a directory in place of the socket: refused as well.
  await guest('mch_sock1', 'rm -f /run/computer-channel/agent.sock && mkdir /run/computer-channel/agent.sock');
  t.equal(await dial(), 'compute_unavailable', 'a directory is refused');
  await new Promise((r) => setTimeout(r, 200));
  t.equal(sockets.length, 0, 'the host socket was never dialled');
  t.equal(Buffer.concat(received).length, 0, 'and received nothing (no token)');
});

t.test('item 6: a machine cannot write past its disk size, and its neighbour keeps writing', async (t) => {
  // A 256 MiB disk (tests may size disks below the catalog's): its writable layer is limited to that.
  await sub.create({ id: 'mch_disk1', resources: { vcpu: 1, memory_mb: 512, disk_gb: 0.25 }, source: { kind: 'base' } });
  const fill = await guest('mch_disk1', 'dd if=/dev/zero of=/root/fill bs=1M count=400 2>&1; echo "rc=$?"; sync; ls -s --block-size=1M /root/fill');
  t.match(fill.out, /Disk quota exceeded|No space left on device/, 'writing past the disk fails with EDQUOT/ENOSPC in the guest');
  t.match(fill.out, /rc=1/);
  const written = Number(/^(\d+) \/root\/fill$/m.exec(fill.out)?.[1] ?? 'NaN');
  t.ok(written <= 256, `no more than the disk's 256 MiB landed (${written} MiB)`);
  const usage = await sub.diskUsage('mch_disk1');
  t.ok(usage.writable_bytes <= 256 * 1024 ** 2, 'and the host counts no more');
  const other = await guest('mch_sock1', 'dd if=/dev/zero of=/root/other bs=1M count=64 2>&1; echo "rc=$?"; rm -f /root/other');
  t.match(other.out, /rc=0/, 'another machine still writes');
  const again = await guest('mch_disk1', 'rm -f /root/fill && dd if=/dev/zero of=/root/small bs=1M count=16 2>&1; echo "rc=$?"');
  t.match(again.out, /rc=0/, 'after deleting, the machine writes again');
});

t.test('item 5: guest uids are a private host range, not host uids', async (t) => {
  const base = sub.uidBase;
  t.ok(base !== null && base >= 2 ** 30, 'a new root gets a private range');
  const map = await guest('mch_sock1', 'cat /proc/self/uid_map /proc/self/gid_map');
  t.same(map.out.trim().split('\n').map((l) => l.trim().split(/\s+/)), [['0', String(base), '65536'], ['0', String(base), '65536']], 'guest 0..65535 = host base..base+65535');
  // Guest root writes in the channel directory (the host's own directory): the file is not host root's.
  await guest('mch_sock1', 'touch /run/computer-channel/by-guest-root && echo x > /root/by-guest-root');
  t.equal(fs.statSync(path.join(path.dirname(sub.channelPath('mch_sock1')), 'by-guest-root')).uid, base, 'owned by the mapped uid on the host');
  // A guest process of uid 1000 (the agent user) with a secret in its environment...
  const rec = JSON.parse(fs.readFileSync(path.join(root, 'machines', 'mch_sock1', 'machine.json'), 'utf8')) as { ctrId: string };
  await run('podman', [...globalArgs(sub.env), 'exec', '-d', '--user', '1000', '--env', 'GUEST_SECRET=s3cr3t-env', containerName('mch_sock1'), 'sleep', '300'], {
    env: { ...process.env, ...podmanEnv(sub.env) },
  });
  let pid = '';
  for (let i = 0; i < 100 && !pid; i++) {
    const procs = fs.readFileSync(`/sys/fs/cgroup/pids/libpod_parent/libpod-${rec.ctrId}/cgroup.procs`, 'utf8').trim().split('\n');
    pid = procs.find((p) => { try { return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8') === 'sleep\u0000300\u0000'; } catch { return false; } }) ?? '';
    if (!pid) await new Promise((r) => setTimeout(r, 50));
  }
  t.ok(pid, 'the guest process runs');
  t.equal(fs.statSync(`/proc/${pid}`).uid, base! + 1000, 'it is host uid base+1000, not 1000');
  // ...is out of reach of the host's uid 1000.
  const peek = await run('setpriv', ['--reuid=1000', '--regid=1000', '--clear-groups', 'cat', `/proc/${pid}/environ`]).then(
    (r) => r.stdout,
    (e: { stderr?: string }) => `refused: ${e.stderr ?? ''}`,
  );
  t.notMatch(peek, 's3cr3t-env', "a host uid-1000 account cannot read the guest uid-1000 process's environment");
  t.match(peek, /refused: .*Permission denied/);
  await guest('mch_sock1', 'pkill -x sleep || true');
});

