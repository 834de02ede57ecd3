/**
 * The QEMU command line of a machine, built by a pure function (tested against pinned output).
 * microvm + direct kernel boot + a small initrd keep a TCG boot near 12 s; every device is virtio-mmio.
 */
import path from 'node:path';
import type { MachineIdentity } from '../identity.js';
import type { MachineResources } from '../substrate.js';
import { kernelNetArgs, type VmNic } from '../net/network.js';

export const AGENT_PORT_NAME = 'computer.agent';

export interface VmPaths {
  kernel: string;
  initrd: string;
  /** The machine's writable qcow2 layer (its backing chain is recorded in the file). */
  disk: string;
  /** The machine's 0700 runtime directory: sockets, pid file, console log. */
  runDir: string;
}

export interface VmArgvSpec {
  id: string;
  resources: MachineResources;
  paths: VmPaths;
  accel: 'kvm' | 'tcg';
  /** No NIC at all, or a tap on the host bridge (outbound, see network.ts). */
  network: 'none' | VmNic;
  /** The disk's node name in QEMU (a live capture moves the active node to a new name). */
  diskNode: string;
  /**
   * TCG: the host's TSC rate. Under load the guest's PIT-based TSC calibration can fail, and the kernel then
   * waits for timer ticks that never come (a boot hang at 0.000000); telling it the rate skips calibration.
   */
  tscKhz?: number;
  /**
   * The machine's own machine-id and hostname (identity.ts), from its record at every boot: the image's init
   * writes them (computer-identity). Absent for a machine recorded before machines had their own (`computer`).
   */
  identity?: MachineIdentity;
}

export function vmFiles(runDir: string) {
  return {
    agentSocket: path.join(runDir, 'agent.sock'),
    qmpSocket: path.join(runDir, 'qmp.sock'),
    pidFile: path.join(runDir, 'qemu.pid'),
    consoleLog: path.join(runDir, 'console.log'),
  };
}

export function vmProcessName(id: string): string {
  return `computer-${id}`;
}

/** What the guest's computer-identity reads: it accepts exactly these two forms, or keeps the image's identity. */
export function kernelIdentityArgs(identity: MachineIdentity): string[] {
  return [`computer.machine_id=${identity.machineId}`, `computer.hostname=${identity.hostname}`];
}

export function buildQemuArgv(s: VmArgvSpec): string[] {
  const f = vmFiles(s.paths.runDir);
  const r = s.resources;
  const kernelCmdline = [
    'console=ttyS0',
    'root=/dev/vda',
    'ro',
    'quiet',
    'loglevel=3',
    // The guest never reboots by itself: a panic or reboot ends the process and the control plane sees it.
    'panic=-1',
    'reboot=t',
    ...(s.tscKhz ? [`tsc_early_khz=${s.tscKhz}`] : []),
    // The guest's address, gateway and nameservers: static, no DHCP server on the host.
    ...(s.network === 'none' ? [] : kernelNetArgs(s.network)),
    ...(s.identity ? kernelIdentityArgs(s.identity) : []),
  ].join(' ');
  const argv = [
    'qemu-system-x86_64',
    '-name',
    `${vmProcessName(s.id)},process=${vmProcessName(s.id)}`,
    // microvm needs its PIT under TCG (pit=off hangs); ACPI carries the power button for a graceful stop.
    '-machine',
    'microvm,acpi=on,pit=on,pic=on,rtc=on,isa-serial=on',
    '-accel',
    s.accel === 'kvm' ? 'kvm' : 'tcg,thread=multi',
    '-cpu',
    s.accel === 'kvm' ? 'host' : 'max',
    '-smp',
    String(r.vcpu),
    '-m',
    `${r.memory_mb}M`,
    '-nodefaults',
    '-no-user-config',
    // QEMU runs as host root and parses everything the guest's devices send: seccomp denies it the syscalls a
    // VMM never needs (the default list, obsolete ones, scheduler/affinity changes). spawn=deny and
    // elevateprivileges=deny would be stronger, but QEMU 7.2 then fails to start with -daemonize (measured).
    '-sandbox',
    'on,obsolete=deny,resourcecontrol=deny',
    '-display',
    'none',
    '-no-reboot',
    '-kernel',
    s.paths.kernel,
    '-initrd',
    s.paths.initrd,
    '-append',
    kernelCmdline,
    '-serial',
    `file:${f.consoleLog}`,
    '-blockdev',
    `driver=qcow2,node-name=${s.diskNode},file.driver=file,file.filename=${s.paths.disk},discard=unmap`,
    '-device',
    `virtio-blk-device,drive=${s.diskNode}`,
    '-device',
    'virtio-serial-device',
    '-chardev',
    `socket,id=agent,path=${f.agentSocket},server=on,wait=off`,
    '-device',
    `virtserialport,chardev=agent,name=${AGENT_PORT_NAME}`,
    '-qmp',
    `unix:${f.qmpSocket},server=on,wait=off`,
    '-device',
    'virtio-rng-device',
  ];
  if (s.network === 'none') argv.push('-nic', 'none');
  else
    // The tap is created and attached to the guarded bridge by the driver; QEMU only opens it (no scripts).
    argv.push(
      '-netdev',
      `tap,id=net0,ifname=${s.network.tap},script=no,downscript=no`,
      '-device',
      `virtio-net-device,netdev=net0,mac=${s.network.mac}`,
    );
  argv.push('-pidfile', f.pidFile, '-daemonize');
  return argv;
}
