import t from 'tap';
import { cniConflist, containersConf, createArgs, globalArgs } from '../../control-plane/src/substrate/container/podman-argv.js';
import { resourcesForSize } from '../../control-plane/src/substrate/substrate.js';
import { uidBaseFor } from '../../control-plane/src/substrate/container/idmap.js';

const catalog = [
  { id: 'small', vcpu: 2, memory_mb: 4096, disk_gb: 10, weight_milli: 500 },
  { id: 'standard', vcpu: 4, memory_mb: 8192, disk_gb: 25, weight_milli: 1000 },
  { id: 'large', vcpu: 8, memory_mb: 16384, disk_gb: 50, weight_milli: 2000 },
];

t.test('podman create argv is pinned', async (t) => {
  const env = { stateDir: '/var/lib/computer/container/podman' };
  const argv = createArgs(env, {
    id: 'mch_abc',
    resources: resourcesForSize('small', catalog),
    rootfs: '/var/lib/computer/container/machines/mch_abc/merged',
    channelDir: '/var/lib/computer/container/machines/mch_abc/channel',
    network: 'none',
    uidBase: uidBaseFor(2),
    hostname: 'computer-0123456789ab',
  });
  t.same(argv, [
    '--root', '/var/lib/computer/container/podman/root',
    '--runroot', '/var/lib/computer/container/podman/run',
    '--tmpdir', '/var/lib/computer/container/podman/tmp',
    '--runtime', 'runc',
    '--cgroup-manager', 'cgroupfs',
    '--events-backend', 'file',
    '--storage-driver', 'vfs',
    '--network-config-dir', '/var/lib/computer/container/podman/networks',
    'create',
    '--name', 'computer-mch_abc',
    '--hostname', 'computer-0123456789ab',
    '--no-hosts',
    '--cgroupns', 'private',
    '--cap-drop', 'all',
    '--cap-add', 'CHOWN,DAC_OVERRIDE,FOWNER,FSETID,KILL,NET_BIND_SERVICE,SETFCAP,SETGID,SETPCAP,SETUID,SYS_CHROOT',
    '--uidmap', '0:1073872896:65536',
    '--gidmap', '0:1073872896:65536',
    '--network', 'none',
    '--cpus', '2',
    '--memory', '4096m',
    '--memory-swap', '4096m',
    '--pids-limit', '2048',
    '--shm-size', '1024m',
    '--tmpfs', '/run:rw,nosuid,nodev,mode=755',
    '--tmpfs', '/tmp:rw,nosuid,nodev,mode=1777',
    '--volume', '/var/lib/computer/container/machines/mch_abc/channel:/run/computer-channel:rw',
    '--log-driver', 'none',
    '--stop-signal', 'SIGTERM',
    '--rootfs', '/var/lib/computer/container/machines/mch_abc/merged',
    '/usr/bin/tini', '--', '/usr/sbin/computer-init', 'container',
  ]);
  t.equal(argv.indexOf('--rootfs'), argv.length - 6, 'every option precedes --rootfs DIR and the command');
  t.same(argv.slice(0, globalArgs(env).length), globalArgs(env));
  const outbound = createArgs(env, {
    id: 'x',
    resources: resourcesForSize('large', catalog),
    rootfs: '/r',
    channelDir: '/c',
    hostname: 'computer',
    network: 'outbound',
    nic: { address: '10.200.4.7', mac: '52:54:0a:c8:04:07' },
  });
  t.same(outbound.slice(outbound.indexOf('--network'), outbound.indexOf('--network') + 6), ['--network', 'computer', '--ip', '10.200.4.7', '--mac-address', '52:54:0a:c8:04:07'], "our own CNI network (not podman's default), the address and MAC its port guard lets through");
  t.equal(outbound[outbound.indexOf('--cpus') + 1], '8');
  t.equal(outbound[outbound.indexOf('--pids-limit') + 1], '8192');
});

t.test('containers.conf carries runc, cgroupfs, file events and the ulimits these hosts allow', async (t) => {
  const c = containersConf();
  t.match(c, /runtime = "runc"/);
  t.match(c, /cgroup_manager = "cgroupfs"/);
  t.match(c, /events_logger = "file"/);
  t.match(c, /default_ulimits = \["nofile=20000:20000", "nproc=32768:32768"\]/);
});

t.test('sizes map from the catalog passed in', async (t) => {
  t.same(resourcesForSize('standard', catalog), { vcpu: 4, memory_mb: 8192, disk_gb: 25 });
  t.same(resourcesForSize('large', catalog), { vcpu: 8, memory_mb: 16384, disk_gb: 50 });
  const changed = catalog.map((s) => (s.id === 'small' ? { ...s, vcpu: 1 } : s));
  t.equal(resourcesForSize('small', changed).vcpu, 1, 'server-owned values, not hard-coded');
  t.throws(() => resourcesForSize('small', []), { code: 'invalid_request' });
  t.throws(() => resourcesForSize('small', [{ id: 'small', vcpu: 0, memory_mb: 1, disk_gb: 1 }]), { code: 'internal_error' });
});

t.test('our CNI network: a bridge of our own, leases in our state dir; NAT and firewall are host rules, not plugins', async (t) => {
  const conf = JSON.parse(cniConflist({ stateDir: '/var/lib/computer/container/podman' }, { bridge: 'computer-c1', subnet: '10.200.4.0/22' }));
  t.equal(conf.name, 'computer');
  t.same(conf.plugins.map((p: { type: string }) => p.type), ['bridge']);
  t.match(conf.plugins[0], {
    bridge: 'computer-c1',
    isGateway: true,
    ipMasq: false,
    hairpinMode: false,
    ipam: { type: 'host-local', dataDir: '/var/lib/computer/container/podman/networks/ipam', ranges: [[{ subnet: '10.200.4.0/22', gateway: '10.200.4.1' }]] },
  });
});
