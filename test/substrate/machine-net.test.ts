/**
 * One bridge and subnet per substrate root, allocated host-wide (a private registry directory here).
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { machineNetFor, netForIndex, overlapsRoutes, parseRoutes, releaseMachineNet } from '../../control-plane/src/substrate/net/machine-net.js';

t.test('index to bridge and subnet is pinned', async (t) => {
  t.same(netForIndex('container', 0), { index: 0, bridge: 'computer-c0', subnet: '10.200.0.0/22' });
  t.same(netForIndex('vm', 1), { index: 1, bridge: 'computer-v1', subnet: '10.200.4.0/22' });
  t.same(netForIndex('container', 64), { index: 64, bridge: 'computer-c64', subnet: '10.201.0.0/22' });
  t.same(netForIndex('container', 511), { index: 511, bridge: 'computer-c511', subnet: '10.207.252.0/22' });
  t.throws(() => netForIndex('container', 512));
});

t.test('host routes from /proc/net/route; overlap', async (t) => {
  const text = [
    'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT',
    'eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0',
    'br0\t0000C90A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0',
    'eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0',
  ].join('\n');
  const routes = parseRoutes(text);
  t.same(routes, [
    [180944896, 16, 'br0'], // 10.201.0.0
    [3221225984, 24, 'eth0'], // 192.0.2.0
  ], 'the default route is left out');
  t.ok(overlapsRoutes('10.201.4.0/22', routes), 'inside a /16 route');
  t.notOk(overlapsRoutes('10.200.4.0/22', routes));
  t.ok(overlapsRoutes('10.200.0.0/13', routes), 'a wider subnet holding a route');
});

t.test('roots get distinct networks, keep theirs, and stale entries are taken over', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mnet-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const registry = path.join(dir, 'registry');
  const roots = ['a', 'b', 'c'].map((n) => {
    fs.mkdirSync(path.join(dir, n));
    return path.join(dir, n);
  });
  const a = machineNetFor({ root: roots[0]!, kind: 'container', registry });
  const b = machineNetFor({ root: roots[1]!, kind: 'vm', registry });
  t.not(a.index, b.index, 'two roots, two indexes');
  t.not(a.subnet, b.subnet);
  t.same(machineNetFor({ root: roots[0]!, kind: 'container', registry }), a, 'a root keeps its network');
  t.equal(fs.readFileSync(path.join(registry, String(a.index)), 'utf8'), roots[0]);
  // The registry is lost (a wiped /var/lib): the root takes its recorded index back.
  fs.rmSync(registry, { recursive: true });
  t.same(machineNetFor({ root: roots[0]!, kind: 'container', registry }), a, 'recorded index taken back');
  // Root b is deleted without releasing: its entry is stale and the next root may take it.
  machineNetFor({ root: roots[1]!, kind: 'vm', registry });
  const bIndex = b.index;
  fs.rmSync(roots[1]!, { recursive: true });
  // Same kind as b: the host's own routes (bridges of other roots on this host) rule out the same indexes.
  const c = machineNetFor({ root: roots[2]!, kind: 'vm', registry });
  t.equal(c.index, bIndex, 'a deleted root\'s index is reused');
  releaseMachineNet({ root: roots[2]!, registry });
  t.notOk(fs.existsSync(path.join(registry, String(c.index))), 'released');
});
