/**
 * The ports every machine substrate (vm, container, fake) implements: compute lifecycle, disks and layers, the
 * agent channel, host health; `Substrate` is the four. The control plane's services decide and record; a
 * substrate only acts on the host. Machine ids are the control plane's (mch_…).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import type { MachineSize } from '../../../shared/schemas/machine.js';
import { AppError } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';

export type SubstrateKind = 'vm' | 'container' | 'fake';

/** What a machine gets from the host; shaped like the catalog's SizeSpec so one can be passed as the other. */
export interface MachineResources {
  vcpu: number;
  memory_mb: number;
  disk_gb: number;
}

/** Where a new machine's disk comes from: the current base image, or a captured layer (fork, template). */
export type DiskSource = { kind: 'base' } | { kind: 'layer'; layerId: string };

/**
 * Every create gives the machine its own identity (identity.ts) before the guest starts: a random
 * `/etc/machine-id` (a fork's or template's disk carries its source's, replaced) and the hostname it gives.
 */
export interface CreateSpec {
  id: string;
  resources: MachineResources;
  source: DiskSource;
  /** Outbound-only network (never the host's own services) or none. Default none. */
  network?: 'none' | 'outbound';
}

/**
 * running: the guest runs. stopped: created or stopped, disk kept. lost: records say it exists but the host
 * no longer has it (process gone after a host restart, runtime state missing). absent: never created or destroyed.
 */
export type SubstrateStatus = 'running' | 'stopped' | 'lost' | 'absent';

/**
 * A machine that should be running, as the substrate watch sees it: `running`; `frozen` (it runs, but every
 * process is frozen and no capture of this process is in flight: a control plane killed inside a live capture
 * left it so, or someone froze it from outside; it answers nothing until thawed); `shutdown` (the guest ended
 * itself cleanly: its init exited 0, or QEMU exited on a guest power-off); `crashed` (killed from outside,
 * out of memory, the runtime died); `lost` / `absent` as in SubstrateStatus.
 */
export type Liveness = 'running' | 'frozen' | 'shutdown' | 'crashed' | 'lost' | 'absent';

export interface CaptureResult {
  /** The new immutable layer; pinned by `holder` until unpinned in the layer store. */
  layerId: string;
  bytes: number;
  /** true when the machine kept running across the capture. */
  live: boolean;
}

export interface LayerPin {
  layerId: string;
  holder: string;
  bytes: number;
}

export interface DiskUsage {
  /** The machine's provisioned disk (hot storage is metered on this, not on what is written). */
  provisioned_bytes: number;
  /** Bytes in the machine's own writable layer. */
  writable_bytes: number;
  /** The immutable layers under the machine's disk, top first. */
  chain: string[];
}

/** The shared volume machine disks live on (the container substrate's btrfs volume). */
export interface DiskVolume {
  /** Read-only: the kernel forced it (btrfs aborted a transaction after a write error) or it was mounted so. */
  readOnly: boolean;
  /**
   * A directory on the filesystem holding the volume's file (a loop volume): once that filesystem has room
   * again, `remountDiskVolume` can bring the volume back. Null: native (the root's own filesystem; only the
   * operator can mount it again).
   */
  backingDir: string | null;
}

/**
 * Compute lifecycle: what runs a machine. The only port a driver must write itself; disks (`Layers`, over
 * disks/layer-store.ts), the agent channel and host health have shared pieces (docs/substrates.md).
 */
export interface Compute {
  readonly kind: SubstrateKind;
  /** Prepare the machine (disk, runtime directory). Starts it unless start is false. */
  create(spec: CreateSpec, opts?: { start?: boolean }): Promise<void>;
  start(id: string): Promise<void>;
  /** Graceful stop within timeoutMs, then forced. The disk is kept. */
  stop(id: string, opts?: { timeoutMs?: number }): Promise<void>;
  status(id: string): Promise<SubstrateStatus>;
  /**
   * Is the machine still running, and if not, how did it end. Cheap (no runtime call while the machine runs):
   * the control plane's substrate watch asks every running machine every two seconds.
   */
  liveness(id: string): Promise<Liveness>;
  /**
   * Thaw a running machine liveness() found `frozen`. A freeze a killed control plane recorded is also thawed
   * when the substrate is made. A substrate that never freezes a machine never reports `frozen`; its thaw
   * rejects (`cannotThaw`).
   */
  thaw(id: string): Promise<void>;
  /**
   * Make a running warm pool member a tenant's before its first agent call: a fresh identity (identity.ts), in
   * the running guest. A substrate that cannot rejects (`cannotReidentify`) and the member is never handed out
   * (the create boots cold).
   */
  reidentify(id: string): Promise<void>;
  /** Stop (forced) and delete the machine and its writable layer; layers nothing refers to are freed. */
  destroy(id: string): Promise<void>;
  /** After a control-plane restart: find machines left by the last run and report each one's state. */
  reattach(): Promise<Array<{ id: string; status: SubstrateStatus }>>;
}

/** Disks and layers: captures, the pins that keep layers alive, restores. */
export interface Layers {
  /** Freeze the machine's writable disk into a new immutable layer, live when it is running. */
  capture(id: string, holder: string): Promise<CaptureResult>;
  /** Add a pin on a layer (a template sharing a snapshot's layer). */
  pinLayer(layerId: string, holder: string): Promise<void>;
  /** Drop `holder`'s pin; a layer nothing refers to any more is freed. An unknown layer is not an error. */
  releaseLayer(layerId: string, holder: string): Promise<void>;
  /** Every pin on every layer (the reconciler releases pins whose holder no longer exists). */
  layerPins(): Promise<LayerPin[]>;
  /** Replace a stopped machine's disk with a new one on `layerId` (restore). */
  replaceDisk(id: string, source: DiskSource): Promise<void>;
}

/** The agent channel: what the agent pool (agent-client/pool.ts) needs of a machine's host. */
export interface AgentChannel {
  /** A connected byte stream to the guest agent (HTTP/2 runs over it). */
  openChannel(id: string): Promise<Duplex>;
  /**
   * A fresh agent process (boot, or restarted by the guest's init) accepts its key only with proof that the
   * enrollment comes from the control plane (agent/src/enrollment.ts): a one-time secret delivered through
   * the substrate's private path (container: a file in the channel directory), returned here; or null where
   * the channel itself is the proof (VM: only the host holds the virtio-serial port's other end).
   */
  issueEnrollment(id: string): Promise<string | null>;
}

/** Host health: the shared volume machine disks live on, which the substrate watch checks every pass. */
export interface HostVolume {
  /** The disk volume's health, cheap; null: this substrate has no shared volume. */
  diskVolume(): DiskVolume | null;
  /**
   * Mount a read-only loop volume again (btrfs allows no `remount,rw` after an abort). The control plane stops
   * the machines it records running first; whatever else keeps the volume busy (a container still running,
   * machines' overlay mounts) is let go here. Disks survive; machines start again as usual afterwards.
   * Called only when diskVolume() reported one read-only: without a volume it rejects (`noDiskVolume`).
   */
  remountDiskVolume(): Promise<void>;
}

/** A machine host: the four ports, one object (the machine service holds it; the others take one port). */
export interface Substrate extends Compute, Layers, AgentChannel, HostVolume {}

/**
 * Each port's calls, as data: the forwarders (timed.ts, machine-host.ts) are written over these lists, not
 * over members spelled one by one. `satisfies` below fails to compile when a port gains a call a list lacks.
 */
export const COMPUTE_CALLS = ['create', 'start', 'stop', 'status', 'liveness', 'thaw', 'reidentify', 'destroy', 'reattach'] as const;
export const LAYER_CALLS = ['capture', 'pinLayer', 'releaseLayer', 'layerPins', 'replaceDisk'] as const;
export const CHANNEL_CALLS = ['openChannel', 'issueEnrollment'] as const;
export const VOLUME_CALLS = ['diskVolume', 'remountDiskVolume'] as const;
type Exactly<Listed, Members> = [Exclude<Members, Listed>, Exclude<Listed, Members>] extends [never, never] ? true : false;
true satisfies Exactly<(typeof COMPUTE_CALLS)[number], Exclude<keyof Compute, 'kind'>>;
true satisfies Exactly<(typeof LAYER_CALLS)[number], keyof Layers>;
true satisfies Exactly<(typeof CHANNEL_CALLS)[number], keyof AgentChannel>;
true satisfies Exactly<(typeof VOLUME_CALLS)[number], keyof HostVolume>;
export type SubstrateCall = (typeof COMPUTE_CALLS | typeof LAYER_CALLS | typeof CHANNEL_CALLS | typeof VOLUME_CALLS)[number];
export const SUBSTRATE_CALLS: readonly SubstrateCall[] = [...COMPUTE_CALLS, ...LAYER_CALLS, ...CHANNEL_CALLS, ...VOLUME_CALLS];

/**
 * What reaches a running machine's agent without the substrate object (machine-host.ts): after a control-plane
 * restart, machines still running are served while the guest image is checked.
 */
export interface EarlyChannel {
  /** Filesystem path of the channel's unix socket (for clients that connect themselves). */
  channelPath(id: string): string;
  issueEnrollment(id: string): Promise<string | null>;
}

/** thaw() of a substrate that never freezes a machine (its liveness never says `frozen`). */
export function cannotThaw(): AppError {
  return ERRORS.cannotThaw();
}

/** remountDiskVolume() of a substrate without a shared disk volume (its diskVolume() is null). */
export function cannotReidentify(): AppError {
  return ERRORS.cannotReidentify();
}

export function noDiskVolume(): AppError {
  return ERRORS.noDiskVolumeToRemount();
}

/** Map a catalog size to resources; the catalog (server-owned) is passed in, never hard-coded here. */
export function resourcesForSize(
  size: MachineSize,
  catalog: ReadonlyArray<{ id: string; vcpu: number; memory_mb: number; disk_gb: number }>,
): MachineResources {
  const s = catalog.find((x) => x.id === size);
  if (!s) throw ERRORS.unknownMachineSize([{ field: 'size', message: 'not in the catalog' }]);
  if (!(s.vcpu > 0 && s.memory_mb > 0 && s.disk_gb > 0)) throw ERRORS.catalogSizeNotPositive();
  return { vcpu: s.vcpu, memory_mb: s.memory_mb, disk_gb: s.disk_gb };
}

/** Machine ids reach file names and podman names: only the shape the control plane generates passes. */
export function assertMachineId(id: string): void {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) throw ERRORS.badMachineId();
}

export function notFound(): AppError {
  return ERRORS.machineNotOnSubstrate();
}

/** Linux open(2) flag (not in fs.constants): a handle on the path itself, no read or write access. */
const O_PATH = 0o10000000;

/** The one-time enrollment secret's name in a container's channel directory (the agent's `--enroll-file`). */
export const ENROLL_FILE_NAME = 'enroll';

/**
 * Drop a fresh one-time enrollment secret into a channel directory the guest can write (see openUnixChannel
 * for why every name is resolved through the directory's own fd without following links): written under a
 * random name with O_EXCL|O_NOFOLLOW, so a planted symlink never redirects host root's write, then renamed
 * over `enroll`, so the agent never reads half a secret. It belongs to the directory's owner (guest root's host
 * uid), like the directory.
 */
export function dropEnrollmentSecret(channelDir: string): string {
  const secret = randomBytes(32).toString('base64url');
  const dirFd = fs.openSync(channelDir, O_PATH | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW);
  try {
    const owner = fs.fstatSync(dirFd);
    const dir = `/proc/self/fd/${dirFd}`;
    const tmp = `.enroll-${randomBytes(8).toString('hex')}`;
    const fd = fs.openSync(`${dir}/${tmp}`, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
    try {
      fs.fchownSync(fd, owner.uid, owner.gid);
      fs.writeSync(fd, secret);
    } finally {
      fs.closeSync(fd);
    }
    try {
      fs.renameSync(`${dir}/${tmp}`, `${dir}/${ENROLL_FILE_NAME}`);
    } catch (e) {
      fs.rmSync(`${dir}/${tmp}`, { force: true });
      throw e;
    }
  } finally {
    fs.closeSync(dirFd);
  }
  return secret;
}

/**
 * Connect to a machine's agent channel (a unix socket on the host, whatever the substrate behind it).
 *
 * The socket's directory can be writable by the guest (a container's channel directory is bind-mounted into
 * it), and the control plane runs as host root: a plain `connect(path)` follows a symlink the guest put in
 * place of the socket and sends the machine token and request bodies to any host socket the guest names. So
 * the last component is opened without following links (O_PATH|O_NOFOLLOW, relative to the directory's own
 * fd), must be a socket, and is dialled through `/proc/self/fd/<fd>`: what was checked is what is dialled,
 * whatever the guest renames in between. The directory path itself must be host-only (it is: the machine's
 * directory under the substrate root, 0700).
 */
export function openUnixChannel(socketPath: string): Promise<Duplex> {
  let dirFd = -1;
  let fd = -1;
  const close = () => {
    for (const f of [fd, dirFd]) if (f >= 0) fs.closeSync(f);
    fd = dirFd = -1;
  };
  try {
    dirFd = fs.openSync(path.dirname(socketPath), O_PATH | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW);
    fd = fs.openSync(`/proc/self/fd/${dirFd}/${path.basename(socketPath)}`, O_PATH | fs.constants.O_NOFOLLOW);
    if (!fs.fstatSync(fd).isSocket()) throw new Error('the channel path is not a socket');
  } catch (e) {
    close();
    return Promise.reject(ERRORS.agentChannelNotReachable(e));
  }
  return new Promise((resolve, reject) => {
    const s = net.connect(`/proc/self/fd/${fd}`);
    s.once('connect', () => {
      close();
      resolve(s);
    });
    s.once('error', (e) => {
      close();
      reject(ERRORS.agentChannelNotReachable(e));
    });
  });
}
