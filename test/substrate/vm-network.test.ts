/**
 * VM networking: the pure part (addresses, names, host commands) pinned; then a real TCG VM on a test-only
 * bridge and subnet (never the operator's computer-br0): the guest has its address, route and nameservers,
 * and cannot reach a host service on the bridge's gateway address while the guard is in place. A control run
 * without the guard's INPUT jump proves the probe sees a reachable service. That a `none` VM has only lo (and no
 * tap) is checked on the VM test/substrate/vm.test.ts already boots with network none, not with a boot of its own.
 * There is no internet here, so outbound reachability itself is not tested.
 */
import t from 'tap';
import crypto from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { AppError } from '../../shared/errors.js';
import { forwardRules, GUARD_CHAIN, installHostGuard, natRule } from '../../control-plane/src/substrate/net/host-guard.js';
import { IpHostNet, removePortGuard, removeVmNetwork } from '../../control-plane/src/substrate/net/host-net.js';
import {
  allocateAddress,
  bridgeSteps,
  inSubnet,
  kernelNetArgs,
  macFor,
  nicFor,
  portGuardChain,
  portGuardRestore,
  portGuardRules,
  resolvConfNameservers,
  resolveVmNetwork,
  tapName,
  tapUpSteps,
} from '../../control-plane/src/substrate/net/network.js';
import { VmSubstrate } from '../../control-plane/src/substrate/vm/driver.js';
import { testImage, waitForAgent } from '../helpers/substrate-image.js';
import type { H2Client } from '../helpers/h2-client.js';

const run = promisify(execFile);

t.setTimeout(1_800_000);

t.test('network settings: defaults, validation, nameservers', async (t) => {
  const d = resolveVmNetwork(undefined, ['127.0.0.53', '10.255.255.53', '192.0.2.2', '10.255.255.53', '203.0.113.9', '198.51.100.1'], ['127.0.0.1', '192.0.2.2']);
  t.same(d, {
    bridge: 'computer-br0',
    subnet: '10.201.0.0/16',
    prefix: 16,
    gateway: '10.201.0.1',
    // loopback and the host's own address would never answer a guest (guard); duplicates and a 4th dropped
    dns: ['10.255.255.53', '203.0.113.9', '198.51.100.1'],
    forwardChain: 'COMPUTER-FWD-computer-br0',
  });
  const c = resolveVmNetwork({ bridge: 'br-x', subnet: '172.30.5.77/24', dns: ['192.0.2.53'] }, ['10.255.255.53'], []);
  t.same([c.subnet, c.gateway, c.dns], ['172.30.5.0/24', '172.30.5.1', ['192.0.2.53']], 'subnet normalized; configured dns wins');
  t.same(resolveVmNetwork({ subnet: '10.9.0.0/24' }, ['10.9.0.1'], []).dns, [], 'the gateway (the host) is no nameserver');
  for (const bad of [{ bridge: 'a-very-long-bridge' }, { bridge: 'br.0' }, { bridge: '' }, { subnet: '10.0.0.0/30' }, { subnet: '10.0.0.0/4' }, { subnet: '300.1.1.0/24' }, { subnet: 'fd00::/64' }, { dns: ['fd00::1'] }])
    t.throws(() => resolveVmNetwork(bad, [], []), `rejected: ${JSON.stringify(bad)}`);
  t.same(resolvConfNameservers('# x\nnameserver 10.1.2.3\nsearch a\nnameserver fd00::1\n  nameserver 127.0.0.53 \n'), ['10.1.2.3', '127.0.0.53'], 'IPv4 only');
});

t.test('addresses, tap names, MACs', async (t) => {
  const n = resolveVmNetwork({ subnet: '10.50.0.0/28' }, [], []);
  t.equal(allocateAddress(n, []), '10.50.0.2', 'first machine address after the gateway');
  t.equal(allocateAddress(n, ['10.50.0.2', '10.50.0.4']), '10.50.0.3', 'lowest free');
  const all = Array.from({ length: 13 }, (_, i) => `10.50.0.${i + 2}`);
  t.equal(allocateAddress(n, all.slice(0, 12)), '10.50.0.14', 'the last before broadcast');
  let code = '';
  try {
    allocateAddress(n, all);
  } catch (e) {
    code = e instanceof AppError ? e.code : 'not an AppError';
  }
  t.equal(code, 'compute_unavailable', 'a full subnet');
  t.same(['10.50.0.0', '10.50.0.1', '10.50.0.2', '10.50.0.14', '10.50.0.15', '10.50.0.16', 'x'].map((a) => inSubnet(n, a)), [false, false, true, true, false, false, false]);

  const a = tapName('/var/lib/computer/vm', 'mch_1');
  t.match(a, /^ctap[0-9a-f]{10}$/);
  t.ok(a.length <= 15, 'fits an interface name');
  t.equal(tapName('/var/lib/computer/vm', 'mch_1'), a, 'stable');
  t.not(tapName('/var/lib/computer/vm', 'mch_2'), a);
  t.not(tapName('/tmp/other', 'mch_1'), a, 'another substrate root, another name');

  const m = macFor('10.201.0.7');
  t.equal(m, '52:54:0a:c9:00:07');
  const first = parseInt(m.slice(0, 2), 16);
  t.ok((first & 2) !== 0 && (first & 1) === 0, 'locally administered unicast');
  t.not(macFor('10.201.1.7'), m);

  const nic = nicFor(n, '/r', 'mch_1', '10.50.0.3');
  t.same(nic, { tap: tapName('/r', 'mch_1'), mac: '52:54:0a:32:00:03', address: '10.50.0.3', prefix: 28, gateway: '10.50.0.1', dns: [] });
  t.same(kernelNetArgs({ ...nic, dns: ['192.0.2.53', '192.0.2.54'] }), ['computer.net=10.50.0.3/28,10.50.0.1', 'computer.dns=192.0.2.53,192.0.2.54']);
});

t.test('host commands are pinned', async (t) => {
  const n = resolveVmNetwork({ bridge: 'cbr9', subnet: '10.77.0.0/16' }, [], []);
  t.same(forwardRules(n), [
    ['-w', '-A', 'COMPUTER-FWD-cbr9', '-i', 'cbr9', '-o', 'cbr9', '-j', 'DROP'],
    ['-w', '-A', 'COMPUTER-FWD-cbr9', '-o', 'cbr9', '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT'],
    ['-w', '-A', 'COMPUTER-FWD-cbr9', '-o', 'cbr9', '-j', 'DROP'],
    ['-w', '-A', 'COMPUTER-FWD-cbr9', '-i', 'cbr9', '-s', '10.77.0.0/16', '-j', 'ACCEPT'],
    ['-w', '-A', 'COMPUTER-FWD-cbr9', '-i', 'cbr9', '-j', 'DROP'],
  ]);
  t.same(bridgeSteps(n), {
    before: [
      { argv: ['ip', 'link', 'add', 'cbr9', 'type', 'bridge'], unless: ['ip', 'link', 'show', 'dev', 'cbr9'] },
      { argv: ['sysctl', '-q', '-w', 'net.ipv6.conf.cbr9.disable_ipv6=1'], optional: true },
    ],
    after: [
      { argv: ['ip', 'addr', 'replace', '10.77.0.1/16', 'dev', 'cbr9'] },
      { argv: ['ip', 'link', 'set', 'dev', 'cbr9', 'up'] },
    ],
  });
  t.same(natRule(n), ['-w', '-t', 'nat', '-A', 'POSTROUTING', '-s', '10.77.0.0/16', '!', '-o', 'cbr9', '-j', 'MASQUERADE']);
  t.same(tapUpSteps('ctap0123456789', 'cbr9', { mac: '52:54:0a:4d:00:02', address: '10.77.0.2' }), [
    { argv: ['ip', 'tuntap', 'add', 'dev', 'ctap0123456789', 'mode', 'tap'] },
    { argv: ['ebtables', '-t', 'nat', '-N', 'COMPUTER-ctap0123456789'] },
    { argv: ['ebtables', '-t', 'nat', '-A', 'COMPUTER-ctap0123456789', '-s', '52:54:0a:4d:00:02', '-p', 'IPv4', '--ip-src', '10.77.0.2', '-j', 'RETURN'] },
    { argv: ['ebtables', '-t', 'nat', '-A', 'COMPUTER-ctap0123456789', '-s', '52:54:0a:4d:00:02', '-p', 'ARP', '--arp-mac-src', '52:54:0a:4d:00:02', '--arp-ip-src', '10.77.0.2', '-j', 'RETURN'] },
    { argv: ['ebtables', '-t', 'nat', '-A', 'COMPUTER-ctap0123456789', '-j', 'DROP'] },
    { argv: ['ebtables', '-t', 'nat', '-A', 'PREROUTING', '-i', 'ctap0123456789', '-j', 'COMPUTER-ctap0123456789'] },
    { argv: ['ip', 'link', 'set', 'dev', 'ctap0123456789', 'master', 'cbr9'] },
    { argv: ['bridge', 'link', 'set', 'dev', 'ctap0123456789', 'isolated', 'on'] },
    { argv: ['ip', 'link', 'set', 'dev', 'ctap0123456789', 'up'] },
  ]);
  t.equal(
    portGuardRestore('veth0a1b2c3d', '52:54:0a:4d:00:02', '10.77.0.2'),
    [
      '*nat',
      ':COMPUTER-veth0a1b2c3d RETURN',
      '-A COMPUTER-veth0a1b2c3d -s 52:54:0a:4d:00:02 -p IPv4 --ip-src 10.77.0.2 -j RETURN',
      '-A COMPUTER-veth0a1b2c3d -s 52:54:0a:4d:00:02 -p ARP --arp-mac-src 52:54:0a:4d:00:02 --arp-ip-src 10.77.0.2 -j RETURN',
      '-A COMPUTER-veth0a1b2c3d -j DROP',
      '-A PREROUTING -i veth0a1b2c3d -j COMPUTER-veth0a1b2c3d',
      'COMMIT',
      '',
    ].join('\n'),
    'a container port\'s guard as one ebtables-restore input',
  );
});

/** Connect from a host process (any netns); prints what the service said or why not. */
const probeJs = (host: string, port: number) =>
  `const s=require('net').connect(${port},'${host}');let d='';` +
  `setTimeout(()=>{console.log('timeout');process.exit(2)},4000);` +
  `s.on('data',b=>d+=b);s.on('end',()=>{process.stdout.write(d);process.exit(0)});` +
  `s.on('error',e=>{console.log(e.code);process.exit(3)})`;

t.test('port guard: a machine cannot use another address or MAC (veth in a netns as the machine)', { timeout: 120_000 }, async (t) => {
  // Without a VM: the guest's root could forge addresses, the agent's exec user cannot. The host's guard is
  // lifted for this test bridge so the host service shows what passes the port guard.
  const n = resolveVmNetwork({ bridge: 'ctest-vmbr1', subnet: '10.213.78.0/24' }, [], []);
  const ns = `ctest-ns-${process.pid}`;
  const port = 'ctest-vh0';
  const mac = macFor('10.213.78.2');
  let server: net.Server | null = null;
  t.teardown(async () => {
    server?.close();
    await run('ip', ['netns', 'del', ns]).catch(() => {});
    await run('ip', ['link', 'del', port]).catch(() => {});
    await removePortGuard(port);
    await removeVmNetwork(n);
  });
  await new IpHostNet().ensureBridge(n);
  await run('ip', ['netns', 'add', ns]);
  await run('ip', ['link', 'add', port, 'type', 'veth', 'peer', 'name', 'ctest-vg0', 'netns', ns]);
  for (const r of portGuardRules(port, mac, '10.213.78.2')) await run('ebtables', r);
  await run('ip', ['link', 'set', 'dev', port, 'master', n.bridge]);
  await run('bridge', ['link', 'set', 'dev', port, 'isolated', 'on']);
  await run('ip', ['link', 'set', 'dev', port, 'up']);
  const inNs = (...argv: string[]) => run('ip', ['netns', 'exec', ns, ...argv]);
  await inNs('ip', 'link', 'set', 'dev', 'lo', 'up');
  await inNs('ip', 'link', 'set', 'dev', 'ctest-vg0', 'address', mac);
  await inNs('ip', 'addr', 'add', '10.213.78.2/24', 'dev', 'ctest-vg0');
  await inNs('ip', 'link', 'set', 'dev', 'ctest-vg0', 'up');

  server = net.createServer((s) => s.end('host-service\n'));
  await new Promise<void>((r) => server!.listen(0, n.gateway, () => r()));
  const svc = (server.address() as net.AddressInfo).port;
  const attempt = async () => {
    try {
      return (await inNs(process.execPath, '-e', probeJs(n.gateway, svc))).stdout;
    } catch (e) {
      return (e as { stdout: string }).stdout;
    }
  };
  await run('iptables', ['-w', '-D', 'INPUT', '-i', n.bridge, '-j', GUARD_CHAIN]);
  try {
    t.equal(await attempt(), 'host-service\n', 'control: its own address and MAC pass the port guard');
    await inNs('ip', 'addr', 'flush', 'dev', 'ctest-vg0');
    await inNs('ip', 'addr', 'add', '10.213.78.9/24', 'dev', 'ctest-vg0');
    t.not(await attempt(), 'host-service\n', 'another address of the subnet is dropped');
    await inNs('ip', 'addr', 'flush', 'dev', 'ctest-vg0');
    await inNs('ip', 'addr', 'add', '10.213.78.2/24', 'dev', 'ctest-vg0');
    await inNs('ip', 'link', 'set', 'dev', 'ctest-vg0', 'address', macFor('10.213.78.3'));
    t.not(await attempt(), 'host-service\n', 'another MAC is dropped');
    await inNs('ip', 'link', 'set', 'dev', 'ctest-vg0', 'address', mac);
    t.equal(await attempt(), 'host-service\n', 'back to its own: passes again');
  } finally {
    await installHostGuard(n.bridge);
  }
  t.not(await attempt(), 'host-service\n', 'and the host guard drops it');
  await removePortGuard(port);
  t.notOk((await run('ebtables', ['-t', 'nat', '-L'])).stdout.includes(portGuardChain(port)), 'port guard removed');
});

// A test-only bridge and subnet: the test never touches an operator's computer-br0.
const BRIDGE = 'ctest-vmbr0';
const SUBNET = '10.213.77.0/24';
const GATEWAY = '10.213.77.1';
const res = { vcpu: 2, memory_mb: 1024, disk_gb: 6 };
const BOOT_MS = 240_000;

async function exec(c: H2Client, command: string[]): Promise<{ stdout: string; stderr: string; exit_code: number }> {
  const r = await c.request('POST', '/exec', { command, timeout_ms: 60_000 });
  if (r.status !== 200) throw new Error(`exec status ${r.status}: ${r.body.toString()}`);
  return r.json();
}

/** Connect from inside the guest (node is the image's only TCP client). */
function probe(host: string, port: number): string[] {
  return ['/usr/bin/node', '-e', probeJs(host, port)];
}

async function iptS(bin: string, chain: string, table = 'filter'): Promise<string> {
  return (await run(bin, ['-w', '-t', table, '-S', chain])).stdout;
}

t.test('a real VM on the guarded bridge cannot reach the host, nor a neighbour', { timeout: 1_500_000 }, async (t) => {
  const image = await testImage('all');
  const root = fs.mkdtempSync('/tmp/vn-');
  const sub = new VmSubstrate({
    root,
    kernel: image.kernel,
    initrd: image.initrd,
    baseDisk: image.baseDisk,
    stopTimeoutMs: 60_000,
    network: { bridge: BRIDGE, subnet: SUBNET, dns: ['192.0.2.53', '198.51.100.53'] },
  });
  const clients: H2Client[] = [];
  let server: net.Server | null = null;
  t.teardown(async () => {
    server?.close();
    for (const c of clients) c.session.destroy();
    for (const id of ['mch_vn1', 'mch_vn3', 'mch_vn4']) await sub.destroy(id).catch(() => {});
    await removeVmNetwork(sub.network);
    fs.rmSync(root, { recursive: true, force: true });
  });

  const token1 = crypto.randomBytes(24).toString('hex');
  await sub.create({ id: 'mch_vn1', resources: res, source: { kind: 'base' }, network: 'outbound' });
  const rec = JSON.parse(fs.readFileSync(path.join(root, 'machines', 'mch_vn1', 'machine.json'), 'utf8'));
  t.equal(rec.address, '10.213.77.2', 'the address is recorded with the machine');
  const tap = sub.tapName('mch_vn1');

  // host side: the bridge is up with the gateway, the tap is an isolated port of it, the rules are in place
  t.match((await run('ip', ['-4', '-o', 'addr', 'show', 'dev', BRIDGE])).stdout, `inet ${GATEWAY}/24`);
  const port = (await run('bridge', ['-d', 'link', 'show', 'dev', tap])).stdout;
  t.match(port, `master ${BRIDGE}`, 'the tap is on the bridge');
  t.match(port, /isolated on/, 'as an isolated port');
  t.match((await run('ebtables', ['-t', 'nat', '-L', portGuardChain(tap)])).stdout, `--ip-src ${rec.address}`, 'with its port guard');
  t.equal((await iptS('iptables', 'INPUT')).split('\n').filter((l) => l === `-A INPUT -i ${BRIDGE} -j ${GUARD_CHAIN}`).length, 1, 'guard jump for the bridge');
  t.equal((await iptS('iptables', 'FORWARD')).split('\n').filter((l) => l === `-A FORWARD -j COMPUTER-FWD-${BRIDGE}`).length, 1, 'one forward jump');
  t.match(await iptS('iptables', 'POSTROUTING', 'nat'), `-A POSTROUTING -s ${SUBNET} ! -o ${BRIDGE} -j MASQUERADE`);
  t.equal(fs.readFileSync(`/proc/sys/net/ipv6/conf/${BRIDGE}/disable_ipv6`, 'utf8').trim(), '1', 'no IPv6 on the bridge');

  const a1 = await waitForAgent(sub, 'mch_vn1', token1, BOOT_MS);
  clients.push(a1.client);
  const cfg = await exec(a1.client, ['sh', '-c', "ip -4 -o addr show dev eth0 | awk '{print $4}'; ip route | awk '/^default/{print $3}'; cat /etc/resolv.conf; cat /sys/class/net/eth0/address"]);
  t.equal(cfg.stdout, `10.213.77.2/24\n${GATEWAY}\nnameserver 192.0.2.53\nnameserver 198.51.100.53\n52:54:0a:d5:4d:02\n`, 'guest: address, default route, nameservers, MAC');

  server = net.createServer((s) => s.end('host-service\n'));
  await new Promise<void>((r) => server!.listen(0, GATEWAY, () => r()));
  const svcPort = (server.address() as net.AddressInfo).port;

  const blocked = await exec(a1.client, probe(GATEWAY, svcPort));
  t.not(blocked.exit_code, 0, 'with the guard the host service is unreachable');
  t.not(blocked.stdout, 'host-service\n');

  // control: without the guard's jump for this bridge the same probe reaches the service
  await run('iptables', ['-w', '-D', 'INPUT', '-i', BRIDGE, '-j', GUARD_CHAIN]);
  let open: { stdout: string; exit_code: number };
  try {
    open = await exec(a1.client, probe(GATEWAY, svcPort));
  } finally {
    await installHostGuard(BRIDGE);
  }
  t.equal(open.stdout, 'host-service\n', 'control: reachable without the guard');
  t.equal(open.exit_code, 0);
  const again = await exec(a1.client, probe(GATEWAY, svcPort));
  t.not(again.exit_code, 0, 'guard back: unreachable again');

  // Machine to machine: a second outbound VM cannot reach a service in the first. Two layers stop it: the
  // isolated bridge ports (L2) and the bridge's FORWARD chain (bridge-to-bridge drop; on hosts with
  // br_netfilter it also sees bridged frames). Each layer is shown to hold alone; both removed is the control.
  const token4 = crypto.randomBytes(24).toString('hex');
  await sub.create({ id: 'mch_vn4', resources: res, source: { kind: 'base' }, network: 'outbound' });
  const a4 = await waitForAgent(sub, 'mch_vn4', token4, BOOT_MS);
  clients.push(a4.client);
  t.equal((await exec(a4.client, ['sh', '-c', "ip -4 -o addr show dev eth0 | awk '{print $4}'"])).stdout, '10.213.77.3/24\n', 'the second machine gets the next address');
  const guestPort = 7000 + crypto.randomInt(1000);
  const serve = `require('net').createServer(s=>s.end('guest-service\\n')).listen(${guestPort},'0.0.0.0')`;
  await exec(a1.client, ['sh', '-c', `setsid /usr/bin/node -e "${serve}" </dev/null >/dev/null 2>&1 &`]);
  let local = { stdout: '', exit_code: 1 };
  for (let i = 0; i < 50 && local.stdout !== 'guest-service\n'; i++) {
    local = await exec(a1.client, probe('127.0.0.1', guestPort));
    if (local.stdout !== 'guest-service\n') await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(local.stdout, 'guest-service\n', 'the service answers inside its own machine');
  const tap4 = sub.tapName('mch_vn4');
  const fwdJump = ['FORWARD', '-j', sub.network.forwardChain];
  const neighbour = () => exec(a4.client, probe('10.213.77.2', guestPort));
  const both = await neighbour();
  t.not(both.exit_code, 0, 'the neighbour is unreachable');
  await run('iptables', ['-w', '-D', ...fwdJump]);
  try {
    t.not((await neighbour()).exit_code, 0, 'isolated ports alone keep machines apart');
    await run('bridge', ['link', 'set', 'dev', tap4, 'isolated', 'off']);
    const none = await neighbour();
    t.equal(none.stdout, 'guest-service\n', 'control: reachable with both layers off');
    await run('iptables', ['-w', '-I', 'FORWARD', '1', ...fwdJump.slice(1)]);
    const fwdOnly = await neighbour();
    const brNetfilter = fs.existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables') && fs.readFileSync('/proc/sys/net/bridge/bridge-nf-call-iptables', 'utf8').trim() === '1';
    if (brNetfilter) t.not(fwdOnly.exit_code, 0, 'br_netfilter host: the FORWARD chain alone keeps machines apart');
    else t.comment('no br_netfilter: bridged frames skip iptables; isolation is the L2 layer');
  } finally {
    await run('bridge', ['link', 'set', 'dev', tap4, 'isolated', 'on']).catch(() => {});
    if (!(await run('iptables', ['-w', '-C', ...fwdJump]).then(() => true, () => false))) await run('iptables', ['-w', '-I', 'FORWARD', '1', ...fwdJump.slice(1)]);
  }
  t.match((await run('bridge', ['-d', 'link', 'show', 'dev', tap4])).stdout, /isolated on/);
  a4.client.session.destroy();
  await sub.destroy('mch_vn4');
  t.notOk(fs.existsSync(`/sys/class/net/${tap4}`), 'destroy removed the tap');

  // QEMU dies: the machine is lost and its tap is reaped
  a1.client.session.destroy();
  process.kill(Number(fs.readFileSync(path.join(root, 'machines', 'mch_vn1', 'qemu.pid'), 'utf8')), 'SIGKILL');
  let st = await sub.status('mch_vn1');
  for (let i = 0; i < 50 && st === 'running'; i++) {
    await new Promise((r) => setTimeout(r, 100));
    st = await sub.status('mch_vn1');
  }
  t.equal(st, 'lost');
  t.notOk(fs.existsSync(`/sys/class/net/${tap}`), 'the dead machine has no tap left');
  t.notOk((await run('ebtables', ['-t', 'nat', '-L'])).stdout.includes(portGuardChain(tap)), 'nor a port guard');

  // the address is held until destroy, then handed out again
  await sub.create({ id: 'mch_vn3', resources: res, source: { kind: 'base' }, network: 'outbound' }, { start: false });
  t.equal(JSON.parse(fs.readFileSync(path.join(root, 'machines', 'mch_vn3', 'machine.json'), 'utf8')).address, '10.213.77.3', 'a lost machine keeps its address');
  await sub.destroy('mch_vn1');
  await sub.destroy('mch_vn3');
  await sub.create({ id: 'mch_vn3', resources: res, source: { kind: 'base' }, network: 'outbound' }, { start: false });
  t.equal(JSON.parse(fs.readFileSync(path.join(root, 'machines', 'mch_vn3', 'machine.json'), 'utf8')).address, '10.213.77.2', 'destroy released the addresses');
  await sub.destroy('mch_vn3');
  t.notOk(fs.existsSync(`/sys/class/net/${tap}`));

  await removeVmNetwork(sub.network);
  t.notOk(fs.existsSync(`/sys/class/net/${BRIDGE}`), 'test bridge removed');
  const left = [await iptS('iptables', 'INPUT'), await iptS('iptables', 'FORWARD'), await iptS('iptables', 'POSTROUTING', 'nat'), await iptS('ip6tables', 'INPUT')].join('');
  t.notOk(left.includes(BRIDGE), 'no rule for the test bridge is left');
});
