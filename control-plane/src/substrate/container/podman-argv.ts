/**
 * Pure builders for what is handed to podman (tested against pinned output). Podman runs rootful with runc
 * (crun refuses the cgroup v1 hybrid hosts), cgroupfs (no systemd PID 1), the file events backend and a
 * private storage root, so it never touches a system-wide podman's state.
 */
import path from 'node:path';
import type { MachineResources } from '../substrate.js';
import { idmapArgs } from './idmap.js';

export interface PodmanEnv {
  /** Private podman state: <stateDir>/root (storage, container records), <stateDir>/containers.conf. */
  stateDir: string;
  /**
   * Runtime state (<runDir>/run, <runDir>/tmp), default under stateDir. On a tmpfs such as /run it vanishes
   * at reboot, which is how podman notices a reboot and resets its containers' states.
   */
  runDir?: string;
  /**
   * containers/storage driver. Machines run on `--rootfs` (our own overlay chain), never on podman images, so
   * `vfs` (which mounts nothing) is enough; the `overlay` driver bind-mounts its home on itself, and podman's
   * own exit-cleanup process re-creates that mount after the last container is gone. Roots first made with
   * overlay keep it (podman refuses a driver change).
   */
  storageDriver?: 'vfs' | 'overlay';
}

/**
 * Outbound containers join our own CNI network, never the system podman's `podman` network: the host guard
 * drops a bridge's traffic to the host, which must not hit another podman user's containers on cni-podman0.
 */
export const CONTAINER_NETWORK = 'computer';

/** The bridge and subnet of one substrate root (allocated host-wide, see machine-net.ts). */
export interface BridgeNet {
  bridge: string;
  subnet: string;
}

/** Where the host's channel directory appears in the guest (the image's init expects it there). */
export const GUEST_CHANNEL_DIR = '/run/computer-channel';
export const CONTAINER_PREFIX = 'computer-';

export function containerName(id: string): string {
  return CONTAINER_PREFIX + id;
}

export function networkConfigDir(env: PodmanEnv): string {
  return path.join(env.stateDir, 'networks');
}

/**
 * The CNI config of our network: only a bridge with host-local addresses (leases kept in our state dir).
 * NAT, forwarding and the host guard are host rules installed once for the bridge (installOutboundRules),
 * not per container: podman's default conflist (ipMasq, portmap, firewall, tuning) runs a handful of
 * iptables processes on every container start.
 */
export function cniConflist(env: PodmanEnv, net: BridgeNet): string {
  const gateway = net.subnet.replace(/\.0\/\d+$/, '.1');
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: CONTAINER_NETWORK,
      plugins: [
        {
          type: 'bridge',
          bridge: net.bridge,
          isGateway: true,
          ipMasq: false,
          hairpinMode: false,
          ipam: {
            type: 'host-local',
            dataDir: path.join(networkConfigDir(env), 'ipam'),
            routes: [{ dst: '0.0.0.0/0' }],
            ranges: [[{ subnet: net.subnet, gateway }]],
          },
        },
      ],
    },
    null,
    2,
  );
}

/** containers.conf for our private podman: runc, cgroupfs, file events, the ulimits these hosts allow. */
export function containersConf(): string {
  return [
    '[containers]',
    // root lacks CAP_SYS_RESOURCE under the hosts' hard nofile 20000: podman's default (1048576) fails setrlimit.
    'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]',
    '',
    '[engine]',
    'runtime = "runc"',
    'cgroup_manager = "cgroupfs"',
    'events_logger = "file"',
    '',
  ].join('\n');
}

export function globalArgs(env: PodmanEnv): string[] {
  return [
    '--root',
    path.join(env.stateDir, 'root'),
    '--runroot',
    path.join(env.runDir ?? env.stateDir, 'run'),
    '--tmpdir',
    path.join(env.runDir ?? env.stateDir, 'tmp'),
    '--runtime',
    'runc',
    '--cgroup-manager',
    'cgroupfs',
    '--events-backend',
    'file',
    '--storage-driver',
    env.storageDriver ?? 'vfs',
    '--network-config-dir',
    networkConfigDir(env),
  ];
}

export function podmanEnv(env: PodmanEnv): Record<string, string> {
  return { CONTAINERS_CONF: path.join(env.stateDir, 'containers.conf') };
}

export interface RunSpec {
  id: string;
  resources: MachineResources;
  /** The machine's merged overlay mount: the container's root. */
  rootfs: string;
  /** Host directory (0700) bind-mounted at GUEST_CHANNEL_DIR; holds the agent socket and token file. */
  channelDir: string;
  network: 'none' | 'outbound';
  /**
   * outbound: the machine's address and MAC, fixed by the driver (not left to CNI) so that its bridge port's
   * guard can let exactly this pair through.
   */
  nic?: { address: string; mac: string };
  /** Host uid of guest root (a user namespace over the root's range); absent for roots made before ranges. */
  uidBase?: number;
  /** The guest's hostname (identity.ts). */
  hostname: string;
}

/** `podman create` for a machine (started separately with `podman start`). */
export function createArgs(env: PodmanEnv, spec: RunSpec): string[] {
  const r = spec.resources;
  return [
    ...globalArgs(env),
    'create',
    '--name',
    containerName(spec.id),
    '--hostname',
    spec.hostname,
    // No podman-written /etc/hosts (it names the container, which carries the machine id, and the host as
    // host.containers.internal); the image's own file is used.
    '--no-hosts',
    // A private cgroup namespace: /proc/self/cgroup and the cgroup mounts show `/`, not podman's container id.
    '--cgroupns',
    'private',
    '--cap-drop',
    'all',
    '--cap-add',
    GUEST_CAPABILITIES.join(','),
    // Guest uids in the root's private host range (see idmap.ts).
    ...(spec.uidBase !== undefined ? idmapArgs(spec.uidBase) : []),
    // outbound: our CNI network's bridge, guarded on the host by an INPUT drop rule (see net/host-guard.ts).
    '--network',
    spec.network === 'none' ? 'none' : CONTAINER_NETWORK,
    ...(spec.network === 'outbound' && spec.nic ? ['--ip', spec.nic.address, '--mac-address', spec.nic.mac] : []),
    '--cpus',
    String(r.vcpu),
    '--memory',
    `${r.memory_mb}m`,
    '--memory-swap',
    `${r.memory_mb}m`,
    '--pids-limit',
    String(pidsLimit(r)),
    '--shm-size',
    `${Math.min(1024, Math.max(64, Math.floor(r.memory_mb / 4)))}m`,
    // Frame buffer, sockets and scratch stay in memory, out of the captured disk layers.
    '--tmpfs',
    '/run:rw,nosuid,nodev,mode=755',
    '--tmpfs',
    '/tmp:rw,nosuid,nodev,mode=1777',
    '--volume',
    `${spec.channelDir}:${GUEST_CHANNEL_DIR}:rw`,
    '--log-driver',
    'none',
    '--stop-signal',
    'SIGTERM',
    // `--rootfs` is a flag: every option comes before the directory.
    '--rootfs',
    spec.rootfs,
    '/usr/bin/tini',
    '--',
    '/usr/sbin/computer-init',
    'container',
  ];
}

/**
 * The capabilities a guest's root keeps: everything else is dropped, whatever podman's defaults are (podman
 * 4.3 also grants NET_RAW, MKNOD and AUDIT_WRITE). Each kept one is justified in docs/security.md: file
 * ownership and permission bypass for root's own files (CHOWN, DAC_OVERRIDE, FOWNER, FSETID), switching to
 * the agent user (SETUID, SETGID, SETPCAP), signals to its own processes (KILL), services on low ports in its
 * own network namespace (NET_BIND_SERVICE), chroot for build tools (SYS_CHROOT), file capabilities set by
 * package installs (SETFCAP). Dropped: NET_RAW (raw and packet sockets: ARP poisoning, forged sources on
 * the bridge), MKNOD (device nodes), AUDIT_WRITE (the host's audit log).
 */
export const GUEST_CAPABILITIES = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT'];

export function pidsLimit(r: MachineResources): number {
  return Math.max(1024, r.vcpu * 1024);
}
