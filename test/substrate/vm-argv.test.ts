import t from 'tap';
import { buildQemuArgv } from '../../control-plane/src/substrate/vm/argv.js';
import { decideKvm, gatherKvmFacts } from '../../control-plane/src/substrate/vm/kvm-probe.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const paths = { kernel: '/img/vmlinuz', initrd: '/img/initrd.img', disk: '/v/disks/blobs/blb_1.qcow2', runDir: '/v/machines/mch_1' };

t.test('qemu argv is pinned (tcg, no network)', async (t) => {
  t.same(buildQemuArgv({ id: 'mch_1', resources: { vcpu: 2, memory_mb: 2048, disk_gb: 10 }, paths, accel: 'tcg', network: 'none', diskNode: 'disk0' }), [
    'qemu-system-x86_64',
    '-name', 'computer-mch_1,process=computer-mch_1',
    '-machine', 'microvm,acpi=on,pit=on,pic=on,rtc=on,isa-serial=on',
    '-accel', 'tcg,thread=multi',
    '-cpu', 'max',
    '-smp', '2',
    '-m', '2048M',
    '-nodefaults',
    '-no-user-config',
    '-sandbox', 'on,obsolete=deny,resourcecontrol=deny',
    '-display', 'none',
    '-no-reboot',
    '-kernel', '/img/vmlinuz',
    '-initrd', '/img/initrd.img',
    '-append', 'console=ttyS0 root=/dev/vda ro quiet loglevel=3 panic=-1 reboot=t',
    '-serial', 'file:/v/machines/mch_1/console.log',
    '-blockdev', 'driver=qcow2,node-name=disk0,file.driver=file,file.filename=/v/disks/blobs/blb_1.qcow2,discard=unmap',
    '-device', 'virtio-blk-device,drive=disk0',
    '-device', 'virtio-serial-device',
    '-chardev', 'socket,id=agent,path=/v/machines/mch_1/agent.sock,server=on,wait=off',
    '-device', 'virtserialport,chardev=agent,name=computer.agent',
    '-qmp', 'unix:/v/machines/mch_1/qmp.sock,server=on,wait=off',
    '-device', 'virtio-rng-device',
    '-nic', 'none',
    '-pidfile', '/v/machines/mch_1/qemu.pid',
    '-daemonize',
  ]);
});

t.test('kvm argv uses the host cpu; outbound adds a tap NIC and the address on the kernel command line', async (t) => {
  const nic = { tap: 'ctap0123456789', mac: '52:54:0a:c9:00:07', address: '10.201.0.7', prefix: 16, gateway: '10.201.0.1', dns: ['192.0.2.53', '198.51.100.53'] };
  const a = buildQemuArgv({ id: 'm', resources: { vcpu: 8, memory_mb: 16384, disk_gb: 50 }, paths, accel: 'kvm', network: nic, diskNode: 'disk3' });
  t.equal(a[a.indexOf('-accel') + 1], 'kvm');
  t.equal(a[a.indexOf('-cpu') + 1], 'host');
  t.equal(a[a.indexOf('-m') + 1], '16384M');
  t.ok(a.includes('driver=qcow2,node-name=disk3,file.driver=file,file.filename=/v/disks/blobs/blb_1.qcow2,discard=unmap'));
  t.same(a.slice(a.indexOf('-netdev'), a.indexOf('-netdev') + 4), [
    '-netdev', 'tap,id=net0,ifname=ctap0123456789,script=no,downscript=no',
    '-device', 'virtio-net-device,netdev=net0,mac=52:54:0a:c9:00:07',
  ]);
  t.equal(a[a.indexOf('-append') + 1], 'console=ttyS0 root=/dev/vda ro quiet loglevel=3 panic=-1 reboot=t computer.net=10.201.0.7/16,10.201.0.1 computer.dns=192.0.2.53,198.51.100.53');
  t.notOk(a.includes('-nic'), 'no -nic none next to the tap');
  t.notOk(a.some((x) => x.startsWith('user,') || x.includes('hostfwd')), 'no QEMU user networking');
  t.notOk(a.join(' ').includes('token=') , 'the token itself is never on the command line');
  const noDns = buildQemuArgv({ id: 'm', resources: { vcpu: 1, memory_mb: 512, disk_gb: 5 }, paths, accel: 'tcg', network: { ...nic, dns: [] }, diskNode: 'disk0', tscKhz: 2000000 });
  t.equal(noDns[noDns.indexOf('-append') + 1], 'console=ttyS0 root=/dev/vda ro quiet loglevel=3 panic=-1 reboot=t tsc_early_khz=2000000 computer.net=10.201.0.7/16,10.201.0.1', 'no nameservers: no computer.dns');
});

t.test("the machine's identity is on the kernel command line, after its network", async (t) => {
  const identity = { machineId: '0123456789abcdef0123456789abcdef', hostname: 'computer-0123456789ab' };
  const nic = { tap: 'ctap0123456789', mac: '52:54:0a:c9:00:07', address: '10.201.0.7', prefix: 16, gateway: '10.201.0.1', dns: ['192.0.2.53'] };
  const a = buildQemuArgv({ id: 'm', resources: { vcpu: 1, memory_mb: 512, disk_gb: 5 }, paths, accel: 'tcg', network: nic, diskNode: 'disk0', identity });
  t.equal(
    a[a.indexOf('-append') + 1],
    'console=ttyS0 root=/dev/vda ro quiet loglevel=3 panic=-1 reboot=t computer.net=10.201.0.7/16,10.201.0.1 computer.dns=192.0.2.53 computer.machine_id=0123456789abcdef0123456789abcdef computer.hostname=computer-0123456789ab',
  );
  const none = buildQemuArgv({ id: 'm', resources: { vcpu: 1, memory_mb: 512, disk_gb: 5 }, paths, accel: 'tcg', network: 'none', diskNode: 'disk0', identity });
  t.equal(none[none.indexOf('-append') + 1], 'console=ttyS0 root=/dev/vda ro quiet loglevel=3 panic=-1 reboot=t computer.machine_id=0123456789abcdef0123456789abcdef computer.hostname=computer-0123456789ab');
});

t.test('kvm decision', async (t) => {
  t.same(decideKvm({ devKvm: false, hwVirt: true, kvmModules: ['kvm', 'kvm_intel'] }), { usable: false, reason: 'no_dev_kvm' });
  t.same(decideKvm({ devKvm: true, hwVirt: false, kvmModules: ['kvm', 'kvm_pvm'] }), { usable: false, reason: 'pvm' }, 'this host kind');
  t.same(decideKvm({ devKvm: true, hwVirt: true, kvmModules: ['kvm', 'kvm_pvm'] }), { usable: false, reason: 'pvm' });
  t.same(decideKvm({ devKvm: true, hwVirt: false, kvmModules: ['kvm', 'kvm_intel'] }), { usable: false, reason: 'no_hw_virt' });
  t.same(decideKvm({ devKvm: true, hwVirt: true, kvmModules: ['kvm'] }), { usable: false, reason: 'no_vendor_module' });
  t.same(decideKvm({ devKvm: true, hwVirt: true, kvmModules: ['kvm', 'kvm_intel'] }), { usable: true });
  t.same(decideKvm({ devKvm: true, hwVirt: true, kvmModules: ['kvm', 'kvm_amd'] }), { usable: true });
});

t.test('kvm facts are read from files (fixtures for both host kinds)', async (t) => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'kvmfacts-'));
  t.teardown(() => fs.rmSync(d, { recursive: true, force: true }));
  fs.writeFileSync(path.join(d, 'kvm'), '');
  fs.writeFileSync(path.join(d, 'cpuinfo'), 'processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae vmx sse\n');
  fs.mkdirSync(path.join(d, 'mod', 'kvm_intel'), { recursive: true });
  fs.mkdirSync(path.join(d, 'mod', 'kvm'), { recursive: true });
  fs.mkdirSync(path.join(d, 'mod', 'ext4'), { recursive: true });
  const f = gatherKvmFacts({ dev: path.join(d, 'kvm'), cpuinfo: path.join(d, 'cpuinfo'), modules: path.join(d, 'mod') });
  t.same({ ...f, kvmModules: f.kvmModules.sort() }, { devKvm: true, hwVirt: true, kvmModules: ['kvm', 'kvm_intel'] });
  fs.writeFileSync(path.join(d, 'cpuinfo'), 'flags\t\t: fpu vme de pse tsc msr pae sse hypervisor\n');
  fs.rmSync(path.join(d, 'mod', 'kvm_intel'), { recursive: true });
  fs.mkdirSync(path.join(d, 'mod', 'kvm_pvm'));
  const g = gatherKvmFacts({ dev: path.join(d, 'kvm'), cpuinfo: path.join(d, 'cpuinfo'), modules: path.join(d, 'mod') });
  t.same(decideKvm(g), { usable: false, reason: 'pvm' });
  t.same(decideKvm(gatherKvmFacts({ dev: path.join(d, 'nope'), cpuinfo: path.join(d, 'nope'), modules: path.join(d, 'nope') })), { usable: false, reason: 'no_dev_kvm' });
});
