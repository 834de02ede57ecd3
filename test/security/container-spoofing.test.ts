/**
 * Issue #10 items 1 and 11, cross-tenant traffic between container machines (A and B stand for two
 * organizations' machines on one host, so on one substrate root and bridge).
 *
 * Guest root no longer has raw sockets (NET_RAW is dropped, and the machine's network namespace belongs to the
 * host's user namespace, not the guest's; container-guest.test.ts), but that is defence in depth: a guest
 * that regains them (a kernel bug) must still be stopped by the host. So the attacker here is a process in
 * A's network namespace given raw sockets on purpose (host python3 under `nsenter --net`), which forges from
 * A's eth0:
 *   - an ARP request claiming B's address at A's MAC (poisons the host's neighbour entry for B),
 *   - UDP from B's address to the host and to an outside address (the host would route it),
 *   - a frame with B's MAC as source (teaches the bridge to send B's frames to A's port).
 * The host (a packet socket on the bridge device: it sees only frames that passed the bridge's hooks) and B
 * (a packet socket on its eth0) must see none of it; the host's neighbour entry and the bridge's forwarding
 * database must still name B's MAC and port. A control run with A's port guard removed shows that each
 * attack is seen when nothing stops it.
 */
import t from 'tap';
import { execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import dgram from 'node:dgram';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { containerName, globalArgs, podmanEnv } from '../../control-plane/src/substrate/container/podman-argv.js';
import { macFor } from '../../control-plane/src/substrate/net/network.js';
import { guardPort, removePortGuard } from '../../control-plane/src/substrate/net/host-net.js';
import { containerRig } from '../helpers/container-guest.js';

const run = promisify(execFile);
const PY = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
t.setTimeout(900_000);

/** Forge the four attacks from eth0; each frame carries `marker`. */
const ATTACK = String.raw`
import socket, struct, sys, time
b_ip, b_mac, gw_ip, gw_mac, marker, me = sys.argv[1], bytes.fromhex(sys.argv[2].replace(':', '')), sys.argv[3], bytes.fromhex(sys.argv[4].replace(':', '')), sys.argv[5].encode(), bytes.fromhex(sys.argv[6].replace(':', ''))
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(('eth0', 0))
def csum(b):
    if len(b) % 2: b += b'\0'
    x = sum(struct.unpack('!%dH' % (len(b) // 2), b)); x = (x >> 16) + (x & 0xffff); x += x >> 16
    return ~x & 0xffff
def udp(src_mac, src_ip, dst_ip, tag):
    data = marker + tag
    u = struct.pack('!HHHH', 40000, 9, 8 + len(data), 0) + data
    h = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(u), 1, 0, 64, 17, 0, socket.inet_aton(src_ip), socket.inet_aton(dst_ip))
    h = h[:10] + struct.pack('!H', csum(h)) + h[12:]
    return gw_mac + src_mac + b'\x08\x00' + h + u
arp = b'\xff' * 6 + me + b'\x08\x06' + struct.pack('!HHBBH', 1, 0x0800, 6, 4, 1) + me + socket.inet_aton(b_ip) + b'\0' * 6 + socket.inet_aton(gw_ip)
for _ in range(5):
    s.send(arp)
    s.send(udp(me, b_ip, gw_ip, b'-to-host'))
    s.send(udp(me, b_ip, '192.0.2.1', b'-forwarded'))
    s.send(udp(b_mac, b_ip, gw_ip, b'-mac'))
    time.sleep(0.1)
print('sent')
`;

/** Count frames holding `marker` on `iface` for `secs` seconds (host or guest). */
const SNIFF = String.raw`
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 0))
s.settimeout(0.2)
marker, end, seen = sys.argv[2].encode(), time.time() + float(sys.argv[3]), []
print('ready', flush=True)
while time.time() < end:
    try:
        f = s.recv(65535)
    except socket.timeout:
        continue
    i = f.find(marker)
    if i >= 0: seen.append(f[i + len(marker):i + len(marker) + 12].split(b'\0')[0].decode(errors='replace'))
print(' '.join(sorted(set(seen))) or 'nothing', flush=True)
`;

t.test('a machine cannot poison ARP, forge addresses or steal a neighbour\'s MAC', async (t) => {
  const { sub, root, guest } = await containerRig(t);
  const res = { vcpu: 1, memory_mb: 512, disk_gb: 1 };
  await sub.create({ id: 'mch_spoofA', resources: res, source: { kind: 'base' }, network: 'outbound' });
  await sub.create({ id: 'mch_spoofB', resources: res, source: { kind: 'base' }, network: 'outbound' });
  const rec = (id: string) => JSON.parse(fs.readFileSync(path.join(root, 'machines', id, 'machine.json'), 'utf8')) as { address: string; port: string };
  const a = rec('mch_spoofA');
  const b = rec('mch_spoofB');
  const bridge = sub.net.bridge;
  const gwIp = sub.net.subnet.replace(/\.0\/22$/, '.1');
  const gwMac = fs.readFileSync(`/sys/class/net/${bridge}/address`, 'utf8').trim();
  // The kernel ignores an ARP reply that would change a neighbour entry updated less than `locktime` (1 s by
  // default) ago, so on a fast host the control's poisoning could land inside that window and be ignored.
  // 0 on this root's own bridge makes the host as credulous as it can be, for the guarded case too.
  fs.writeFileSync(`/proc/sys/net/ipv4/neigh/${bridge}/locktime`, '0');
  t.equal(b.address.split('.').length, 4);
  t.ok(fs.existsSync(`/sys/class/net/${bridge}/brif/${a.port}`), "A's recorded port is on its root's own bridge");
  t.match((await run('ebtables', ['-t', 'nat', '-L', `COMPUTER-${a.port}`])).stdout, `--ip-src ${a.address}`, "A's port is guarded");

  const pidOf = async (id: string) =>
    (await run('podman', [...globalArgs(sub.env), 'inspect', '--format', '{{.State.Pid}}', containerName(id)], { env: { ...process.env, ...podmanEnv(sub.env) } })).stdout.trim();
  const [pidA, pidB] = [await pidOf('mch_spoofA'), await pidOf('mch_spoofB')];
  const sniff = (where: 'host' | 'B', marker: string): { ready: Promise<void>; done: Promise<string> } => {
    const argv = where === 'host' ? [PY, '-c', SNIFF, bridge, marker, '4'] : ['nsenter', `--net=/proc/${pidB}/ns/net`, PY, '-c', SNIFF, 'eth0', marker, '4'];
    const p = spawn(argv[0]!, argv.slice(1));
    let out = '';
    let readyFn: () => void = () => {};
    const ready = new Promise<void>((r) => (readyFn = r));
    p.stdout.on('data', (d) => {
      out += d;
      if (out.includes('ready')) readyFn();
    });
    const done = new Promise<string>((r) => p.on('close', () => (readyFn(), r(out.replace(/^ready\n/, '').trim()))));
    return { ready, done };
  };

  /** Run every attack from A; what the host and B saw, and the host's and bridge's view of B afterwards. */
  const attack = async (marker: string) => {
    // The host knows B's real MAC first (as after any exchange with B).
    const u = dgram.createSocket('udp4');
    await new Promise<void>((r) => u.send('hello', 9, b.address, () => r()));
    u.close();
    for (let i = 0; i < 50 && !/lladdr/.test((await run('ip', ['neigh', 'show', b.address, 'dev', bridge])).stdout); i++) await new Promise((r) => setTimeout(r, 50));
    const host = sniff('host', marker);
    const onB = sniff('B', marker);
    await Promise.all([host.ready, onB.ready]);
    const sent = await run('nsenter', [`--net=/proc/${pidA}/ns/net`, PY, '-c', ATTACK, b.address, macFor(b.address), gwIp, gwMac, marker, macFor(a.address)]);
    // The frames are sent, but a loaded host may handle them (ARP, bridge learning) a little later: the host's
    // view of B is watched for 3 s, and any moment it named A counts (a guarded run must never show one).
    let neigh = '';
    let fdb = '';
    let poisoned = false;
    let learned = false;
    for (const end = Date.now() + 3_000; Date.now() < end && !(poisoned && learned); ) {
      neigh = (await run('ip', ['neigh', 'show', b.address, 'dev', bridge])).stdout;
      fdb = (await run('bridge', ['fdb', 'show', 'br', bridge])).stdout.split('\n').find((l) => l.startsWith(macFor(b.address))) ?? '';
      poisoned ||= neigh.includes(`lladdr ${macFor(a.address)}`);
      learned ||= fdb.includes(`dev ${a.port}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return { sent: sent.stdout.trim(), host: await host.done, onB: await onB.done, neigh, fdb, poisoned, learned };
  };

  const guarded = await attack('GUARDED-ATTACK');
  t.equal(guarded.sent, 'sent', 'the attacker had raw sockets and sent every frame');
  t.equal(guarded.host, 'nothing', 'the host received none of the forged frames (nor routed them)');
  t.equal(guarded.onB, 'nothing', 'B saw nothing');
  t.match(guarded.neigh, `lladdr ${macFor(b.address)}`, "the host's neighbour entry for B still names B's MAC");
  t.equal(guarded.poisoned, false, "and never named A's in 3 s of watching");
  t.notMatch(guarded.fdb, `dev ${a.port}`, "the bridge does not send B's frames to A's port");
  t.equal(guarded.learned, false, "nor did it at any point in 3 s of watching");

  // Control: the same attacks with A's port guard removed are seen.
  // The control must see the attacks land; in full-suite runs (a loaded host) a single attempt was seen to miss,
  // so a few fresh attempts, each with the guard removed again, before the control may fail.
  let open = { sent: '', host: '', onB: '', neigh: '', fdb: '', poisoned: false, learned: false };
  try {
    for (let i = 0; i < 4; i++) {
      await removePortGuard(a.port).catch(() => {});
      await run('ip', ['neigh', 'del', b.address, 'dev', bridge]).catch(() => {});
      open = await attack(`OPEN-ATTACK-${i}`);
      if (open.poisoned && open.learned) break;
    }
    t.equal(open.host, '-forwarded -mac -to-host', 'control: without the guard the host receives the forged frames');
    t.ok(open.poisoned, `control: without the guard the host's entry for B is poisoned with A's MAC (${open.neigh.trim()})`);
    t.ok(open.learned, `control: without the guard the bridge learns B's MAC on A's port (${open.fdb.trim()})`);
  } finally {
    await guardPort(a.port, macFor(a.address), a.address);
    await run('ip', ['neigh', 'del', b.address, 'dev', bridge]).catch(() => {});
  }

  // Guest root itself has no raw sockets at all.
  const plain = await guest('mch_spoofA', "python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)' 2>&1");
  t.match(plain.out, /PermissionError/, 'guest root itself cannot open a packet socket');
});

t.test('two substrate roots get two bridges and subnets', async (t) => {
  const one = await containerRig(t);
  const two = await containerRig(t);
  t.not(one.sub.net.bridge, two.sub.net.bridge);
  t.not(one.sub.net.subnet, two.sub.net.subnet);
  const res = { vcpu: 1, memory_mb: 512, disk_gb: 1 };
  await one.sub.create({ id: 'mch_r1', resources: res, source: { kind: 'base' }, network: 'outbound' });
  await two.sub.create({ id: 'mch_r1', resources: res, source: { kind: 'base' }, network: 'outbound' });
  const addr1 = (await one.guest('mch_r1', "ip -4 -o addr show dev eth0 | awk '{print $4}'")).out.trim();
  const addr2 = (await two.guest('mch_r1', "ip -4 -o addr show dev eth0 | awk '{print $4}'")).out.trim();
  t.not(addr1, addr2, 'the same machine id in two roots gets two different addresses');
  t.equal(fs.readdirSync(`/sys/class/net/${one.sub.net.bridge}/brif`).length, 1, 'one port on the first root\'s bridge');
  t.equal(fs.readdirSync(`/sys/class/net/${two.sub.net.bridge}/brif`).length, 1, 'one port on the second root\'s bridge');

  // A machine recorded before addresses were fixed at create (an upgraded root): start gives it one in its
  // root's subnet, makes its container again with it, and guards its port.
  await one.sub.stop('mch_r1');
  const recFile = path.join(one.root, 'machines', 'mch_r1', 'machine.json');
  const old = JSON.parse(fs.readFileSync(recFile, 'utf8')) as Record<string, unknown>;
  delete old.address;
  fs.writeFileSync(recFile, JSON.stringify(old));
  await one.sub.start('mch_r1');
  const upgraded = JSON.parse(fs.readFileSync(recFile, 'utf8')) as { address: string; port: string };
  t.equal((await one.guest('mch_r1', "ip -4 -o addr show dev eth0 | awk '{print $4}'")).out.trim(), `${upgraded.address}/22`, 'an address of its root\'s subnet');
  t.match((await run('ebtables', ['-t', 'nat', '-L', `COMPUTER-${upgraded.port}`])).stdout, `--ip-src ${upgraded.address}`, 'and a guarded port');
});
