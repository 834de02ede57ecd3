/**
 * The container substrate: rootful podman + runc running the guest image's root on each machine's own
 * overlayfs chain (base root <- captured layers <- writable upper), mounted by us and handed to
 * `podman --rootfs`. Containers run in a user namespace over the root's private uid range, without most
 * capabilities, with a guarded bridge port and a disk quota (docs/security.md); they still share the host's
 * kernel: weaker isolation than a VM (Chromium runs without its sandbox here).
 */
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { promisify } from 'node:util';
import { faultPoint } from '../../fault-points.js';
import { LayerStore } from '../disks/layer-store.js';
import { captured, MachineDisks } from '../disks/machine-disks.js';
import { defaultVolumeBytes, ensureBtrfsVolume, readOnlyFs, remountLoopVolume } from '../disks/btrfs.js';
import { isMounted, mountOverlay, unmount, OverlayBackend } from '../disks/overlay-backend.js';
import {
  assertMachineId,
  dropEnrollmentSecret,
  openUnixChannel,
  type CaptureResult,
  type CreateSpec,
  type DiskSource,
  type DiskUsage,
  type DiskVolume,
  type EarlyChannel,
  type Layers,
  type Liveness,
  type MachineResources,
  type Substrate,
  type SubstrateStatus,
} from '../substrate.js';
import { forwardChainName, installOutboundRules, removeOutboundRules, type OutboundBridge } from '../net/host-guard.js';
import { machineNetFor, releaseMachineNet, type MachineNet } from '../net/machine-net.js';
import { allocateAddress, inSubnet, macFor } from '../net/network.js';
import { guardPort, removeBridge, removePortGuard } from '../net/host-net.js';
import { MachineRecords, peekRecord } from '../records.js';
import { idmappedBase, uidBaseFor } from './idmap.js';
import { readCgroupMemory, type CgroupMemory } from './memory.js';
import { IMAGE_HOSTNAME, newIdentity, writeGuestIdentity } from '../identity.js';
import { assertGuestReaches, guestPassable, machineDirs, makeReachDir, reachDirFor, type MachineDirs, type MachinePlace } from './reach.js';
import {
  cniConflist,
  containerName,
  containersConf,
  createArgs,
  globalArgs,
  networkConfigDir,
  podmanEnv,
  type PodmanEnv,
} from './podman-argv.js';
import { ERRORS } from '../../errors.js';

const execFileP = promisify(execFile);

export interface ContainerSubstrateConfig {
  /** What this substrate keeps: podman state, disk layers, machine records (private: 0700 is fine). */
  root: string;
  /**
   * What guest root must reach: each machine's mount point and channel directory (reach.ts); default
   * /var/lib/computer/containers/<hash of root>.
   */
  reachDir?: string;
  /** The guest image's read-only root directory (bottom layer of every new disk). */
  baseRootfs: string;
  /** Default graceful stop timeout. */
  stopTimeoutMs?: number;
  /** podman's runtime state; default /run/computer-podman/<hash of root> (tmpfs on most hosts). */
  runDir?: string;
  /**
   * How live captures duplicate a running machine's writable layer: `auto` (default) keeps the layers on btrfs
   * (the root's own filesystem, else a sparse loop-mounted volume file `<root>/disks.btrfs`) and snapshots
   * them in constant time; `copy` copies the files (time grows with what the machine wrote).
   */
  disks?: 'auto' | 'copy';
  /**
   * Apparent size of the sparse btrfs volume file; default the free space of the filesystem holding `root`
   * when the volume is made, minus a reserve (a tenth, at least 2 GiB) that machines never fill.
   */
  volumeBytes?: number;
  /** Operator-facing warnings (e.g. falling back to copying captures). */
  warn?: (msg: string) => void;
  /** Host-wide registry of machine networks (one bridge and subnet per root); default /var/lib/computer/networks. */
  netRegistry?: string;
}

interface MachineRecord {
  id: string;
  resources: MachineResources;
  disk: string;
  network: 'none' | 'outbound';
  /** Kernel boot id when last started: a container "running" since another boot is lost. */
  boot?: string;
  /** podman's container id (from `podman create`): names the container's cgroup without asking podman. */
  ctrId?: string;
  /** outbound: the machine's IPv4 address on this root's bridge (its MAC is derived from it). */
  address?: string;
  /** outbound, while running: the host side of its veth (guarded on the bridge). */
  port?: string;
  /**
   * A live capture's freeze, recorded before the container is frozen and cleared once it is thawed: a control
   * plane killed in between leaves it here, and the next one thaws the container when it starts.
   */
  frozen?: Freeze;
  /** Where its mount point and channel directory are (reach.ts); absent: under the root (made before). */
  place?: MachinePlace;
  /** The guest's hostname (identity.ts); absent: made before machines had their own (`computer`). */
  hostname?: string;
}

/** How a container was frozen: through its cgroup v1 freezer (the cgroup's path), or `podman pause`. */
type Freeze = { how: 'cgroup'; cgroup: string } | { how: 'podman' };

function bootId(): string {
  try {
    return fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return '';
  }
}

/** The cgroup v1 freezer state file of a container cgroup (as podman or a record names it); '' if not one. */
function freezerStatePath(cg: string): string {
  return cg && /^\/[A-Za-z0-9_./-]+$/.test(cg) && !cg.includes('..') ? path.join('/sys/fs/cgroup/freezer', cg, 'freezer.state') : '';
}

/** Whether a freezer state file says frozen (or freezing: a freeze that never completed is still one). */
function frozenState(stateFile: string): boolean {
  try {
    return fs.readFileSync(stateFile, 'utf8').trim() !== 'THAWED';
  } catch {
    return false;
  }
}

/**
 * Machines on one bridge must not reach each other: every port of the bridge (each container's veth) is an
 * isolated port, which has no L2 path to another isolated port. CNI's bridge plugin cannot set it, so it is
 * set after each start (sysfs, no process); the bridge's FORWARD chain already drops what br_netfilter hands
 * to iptables in the meantime.
 */
function bridgePorts(bridge: string): string[] {
  try {
    return fs.readdirSync(`/sys/class/net/${bridge}/brif`);
  } catch {
    return [];
  }
}

function isolateBridgePorts(bridge: string): void {
  const dir = `/sys/class/net/${bridge}/brif`;
  let ports: string[] = [];
  try {
    ports = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const p of ports) {
    try {
      if (fs.readFileSync(path.join(dir, p, 'isolated'), 'utf8').trim() !== '1') fs.writeFileSync(path.join(dir, p, 'isolated'), '1');
    } catch {
      /* the port went away */
    }
  }
}

/** Where a machine's record says its mount point and channel are (a machine not yet recorded: the reach dir). */
function placeOf(root: string, id: string): MachinePlace {
  const rec = peekRecord<MachineRecord>(root, id);
  return rec ? (rec.place ?? 'root') : 'reach';
}

/**
 * A machine's agent socket: known without the substrate object, so a restarted control plane reaches running
 * machines before its guest image is checked (machine-host.ts).
 */
export function containerChannelPath(root: string, id: string, reach = reachDirFor(root)): string {
  assertMachineId(id);
  return path.join(machineDirs({ root, reach }, id, placeOf(root, id)).channel, 'agent.sock');
}

/** The channel of a machine under a substrate root, usable before the substrate object exists (machine-host.ts). */
export function containerEarlyChannel(root: string, reach = reachDirFor(root)): EarlyChannel {
  return {
    channelPath: (id) => containerChannelPath(root, id, reach),
    issueEnrollment: async (id) => dropEnrollmentSecret(path.dirname(containerChannelPath(root, id, reach))),
  };
}

export class ContainerSubstrate implements Substrate {
  readonly kind = 'container' as const;
  readonly disks: LayerStore;
  private readonly machineDisks: MachineDisks;
  private readonly records: MachineRecords<MachineRecord>;
  readonly env: PodmanEnv;
  /** How live captures duplicate the writable layer (see `disks` in the config). */
  readonly diskMode: 'snapshot' | 'copy';
  /** The bridge's host rules, installed once per process before the first outbound start. */
  private outboundRules: Promise<void> | null = null;
  /** This root's own bridge and subnet (allocated host-wide: no other root or control plane shares them). */
  readonly net: MachineNet;
  /** Outbound starts one at a time: the port a start adds to the bridge is told apart from the others by that. */
  private portLock: Promise<unknown> = Promise.resolve();
  /** Addresses handed out by creates still in flight. */
  private readonly reserved = new Set<string>();
  /**
   * Host uid of guest root: the root's private range (idmap.ts), fixed when the root is made. Null for a root
   * that already held machines before ranges existed (their layers hold host uid 0 files).
   */
  readonly uidBase: number | null;
  /** Where the disks' btrfs lives: the root's own filesystem, a loop volume file, or none (plain directory). */
  private volume: 'native' | 'loop' | null = null;
  /** Machines this process is capturing live (frozen on purpose); any other frozen machine is a fault. */
  private readonly capturing = new Set<string>();
  /** The thaw of freezes a killed control plane left (started by the constructor; reattach waits for it). */
  private readonly leftoverFreezes: Promise<void>;
  /** What guest root must reach (reach.ts): machines' mount points and channel directories. */
  readonly reachDir: string;

  constructor(private readonly cfg: ContainerSubstrateConfig) {
    fs.mkdirSync(cfg.root, { recursive: true, mode: 0o700 });
    const runDir = cfg.runDir ?? path.join('/run/computer-podman', crypto.createHash('sha256').update(path.resolve(cfg.root)).digest('hex').slice(0, 12));
    const stateDir = path.join(cfg.root, 'podman');
    this.env = { stateDir, runDir, storageDriver: fs.existsSync(path.join(stateDir, 'root', 'overlay')) ? 'overlay' : 'vfs' };
    fs.mkdirSync(path.join(this.env.stateDir, 'root'), { recursive: true, mode: 0o700 });
    for (const d of ['run', 'tmp']) fs.mkdirSync(path.join(runDir, d), { recursive: true, mode: 0o700 });
    fs.writeFileSync(path.join(this.env.stateDir, 'containers.conf'), containersConf());
    fs.mkdirSync(networkConfigDir(this.env), { recursive: true, mode: 0o700 });
    this.net = machineNetFor({ root: cfg.root, kind: 'container', ...(cfg.netRegistry ? { registry: cfg.netRegistry } : {}) });
    fs.writeFileSync(path.join(networkConfigDir(this.env), 'computer.conflist'), cniConflist(this.env, this.net));
    this.records = new MachineRecords(cfg.root);
    this.uidBase = this.guestRange();
    // runc mounts the machine's root and channel as guest root (host uid uidBase): it must pass every directory
    // above them, and no host user but root may enter them. They live outside the root (DATA_DIR stays 0700),
    // and a host where guest root still cannot reach them is told so now, not at the first start.
    this.reachDir = cfg.reachDir ?? reachDirFor(cfg.root);
    makeReachDir(this.reachDir, this.uidBase);
    if (this.uidBase !== null) assertGuestReaches(this.reachDir, this.uidBase);
    const disksDir = path.join(cfg.root, 'disks');
    let snapshots = false;
    let quotas = false;
    if (cfg.disks !== 'copy') {
      const vol = ensureBtrfsVolume({ dir: disksDir, image: path.join(cfg.root, 'disks.btrfs'), sizeBytes: cfg.volumeBytes ?? defaultVolumeBytes(fs.statfsSync(cfg.root)) });
      snapshots = vol.kind === 'btrfs';
      this.volume = vol.kind === 'btrfs' ? vol.how : null;
      quotas = vol.kind === 'btrfs' && vol.quotas;
      if (vol.kind === 'plain') cfg.warn?.(`container substrate: live captures copy files and machines' disks are not limited (${vol.reason})`);
      else if (!quotas) cfg.warn?.('container substrate: btrfs quotas unavailable: machines\' disks are not limited to their size');
    }
    this.diskMode = snapshots ? 'snapshot' : 'copy';
    this.disks = new LayerStore(disksDir, new OverlayBackend({ snapshots, quotas }));
    this.machineDisks = new MachineDisks(this.disks, cfg.baseRootfs);
    this.leftoverFreezes = this.thawLeftovers();
  }

  /**
   * Containers a control plane killed inside a live capture left frozen (their records say so): thawed before
   * anything else, so a running machine answers again as soon as the control plane is back. A cgroup freeze is
   * undone synchronously, within the constructor; only the `podman unpause` fallback runs after it.
   */
  private async thawLeftovers(): Promise<void> {
    for (const id of this.records.entries()) {
      let rec: MachineRecord;
      try {
        rec = this.record(id);
      } catch {
        continue;
      }
      if (!rec.frozen) continue;
      this.cfg.warn?.(`container substrate: ${id} was left frozen by a capture the control plane did not finish; thawing it`);
      try {
        await this.thawAs(id, rec.frozen);
      } catch (e) {
        // The substrate watch finds it frozen and tries again.
        this.cfg.warn?.(`container substrate: ${id} could not be thawed (${(e as Error).message})`);
      }
    }
  }

  /** The root's uid range, recorded in `<root>/idmap.json` when the root is first used. */
  private guestRange(): number | null {
    const f = path.join(this.cfg.root, 'idmap.json');
    try {
      return (JSON.parse(fs.readFileSync(f, 'utf8')) as { base: number }).base;
    } catch {
      /* not yet recorded */
    }
    if (this.records.entries().length > 0) {
      this.cfg.warn?.('container substrate: this root\'s machines predate private uid ranges; guest uids are host uids');
      return null;
    }
    const base = uidBaseFor(this.net.index);
    fs.writeFileSync(f, JSON.stringify({ base }));
    return base;
  }

  private async podman(args: string[], opts: { allowFail?: boolean } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const r = await execFileP('podman', [...globalArgs(this.env), ...args], {
        env: { ...process.env, ...podmanEnv(this.env) },
        maxBuffer: 16 * 1024 * 1024,
      });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (e) {
      const err = e as { code?: number; stdout?: string; stderr?: string };
      if (opts.allowFail) return { code: typeof err.code === 'number' ? err.code : 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
      // podman's stderr can name paths; it goes to the cause, not the message.
      throw ERRORS.podmanFailed(args[0], e);
    }
  }

  private machineDir(id: string): string {
    return this.records.dir(id);
  }
  /** A machine's mount point and channel directory, where its record places them. */
  private placed(rec: Pick<MachineRecord, 'id' | 'place'>): MachineDirs {
    return machineDirs({ root: this.cfg.root, reach: this.reachDir }, rec.id, rec.place ?? 'root');
  }
  /** The machine's overlay mount point (tests look at it). */
  mergedPath(id: string): string {
    return this.placed(this.record(id)).merged;
  }
  channelPath(id: string): string {
    return containerChannelPath(this.cfg.root, id, this.reachDir);
  }

  private record(id: string): MachineRecord {
    return this.records.read(id);
  }

  private writeRecord(rec: MachineRecord): void {
    this.records.write(rec);
  }

  private async mount(rec: MachineRecord): Promise<void> {
    const target = this.placed(rec).merged;
    if (isMounted(target)) return;
    const d = this.disks.disk(rec.disk);
    if (this.uidBase === null) return mountOverlay(target, this.disks.lowerPaths(d), d.base, this.disks.blobPath(d.writable));
    // The base image through its idmapped view: its uid 0 files are guest root's (host uid uidBase).
    const base = await idmappedBase(path.join(this.cfg.root, 'bases'), d.base, this.uidBase);
    await mountOverlay(target, this.disks.lowerPaths(d).map((p) => (p === d.base ? base : p)), base, this.disks.blobPath(d.writable));
  }

  async create(spec: CreateSpec, opts: { start?: boolean } = {}): Promise<void> {
    assertMachineId(spec.id);
    const dir = this.machineDir(spec.id);
    if (this.records.has(spec.id)) throw ERRORS.machineExistsOnSubstrate();
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.makePlace(spec.id);
    const disk = await this.machineDisks.make(spec);
    const identity = newIdentity();
    const rec: MachineRecord = {
      id: spec.id, resources: spec.resources, disk: disk.id, network: spec.network ?? 'none', place: 'reach', hostname: identity.hostname,
    };
    if (rec.network === 'outbound') {
      rec.address = allocateAddress(this.net, [...this.usedAddresses(), ...this.reserved]);
      this.reserved.add(rec.address);
    }
    try {
      this.writeRecord(rec);
      await this.mount(rec);
      // Before the guest ever runs: its own machine-id (a fork's or template's disk holds its source's).
      writeGuestIdentity(this.placed(rec).merged, identity, this.uidBase);
      faultPoint('container.create.before_podman');
      await this.podmanCreate(rec);
    } catch (e) {
      await this.destroy(spec.id).catch(() => {});
      throw e;
    } finally {
      if (rec.address) this.reserved.delete(rec.address);
    }
    if (opts.start !== false) await this.start(spec.id);
  }

  /**
   * A machine's directory in the reach dir: passable by guest root only. The channel directory in it is the
   * agent's only door: 0700 guest root (host root otherwise). Nothing that opens it is stored there: a fresh
   * agent gets a one-time secret just before its enrollment (issueEnrollment).
   */
  private makePlace(id: string): void {
    const at = machineDirs({ root: this.cfg.root, reach: this.reachDir }, id, 'reach');
    fs.mkdirSync(at.dir, { recursive: true, mode: 0o700 });
    guestPassable(at.dir, this.uidBase);
    fs.mkdirSync(at.merged, { recursive: true });
    fs.mkdirSync(at.channel, { recursive: true, mode: 0o700 });
    if (this.uidBase !== null) fs.chownSync(at.channel, this.uidBase, this.uidBase);
  }

  /**
   * A machine made before the reach dir (its mount point and channel under the root, which guest root may not
   * pass), or whose directory there is gone (removed by hand): placed there at its start, and its container made
   * again with the new paths. Its disk does not move.
   */
  private async placeInReach(rec: MachineRecord): Promise<void> {
    const old = this.placed(rec);
    await unmount(old.merged);
    fs.rmSync(old.channel, { recursive: true, force: true });
    if (fs.existsSync(old.merged)) fs.rmdirSync(old.merged);
    this.makePlace(rec.id);
    rec.place = 'reach';
    this.writeRecord(rec);
    await this.recreate(rec);
  }

  /** `podman create` for a machine record: at create, and again when a broken container is replaced. */
  private async podmanCreate(rec: MachineRecord): Promise<void> {
    const created = await this.podman(
      createArgs(this.env, {
        id: rec.id,
        resources: rec.resources,
        rootfs: this.placed(rec).merged,
        channelDir: this.placed(rec).channel,
        network: rec.network,
        hostname: rec.hostname ?? IMAGE_HOSTNAME,
        ...(rec.address ? { nic: { address: rec.address, mac: macFor(rec.address) } } : {}),
        ...(this.uidBase !== null ? { uidBase: this.uidBase } : {}),
      }).slice(globalArgs(this.env).length),
    );
    const ctrId = created.stdout.trim().split('\n').pop() ?? '';
    if (/^[0-9a-f]{64}$/.test(ctrId)) rec.ctrId = ctrId;
    else delete rec.ctrId;
    this.writeRecord(rec);
  }

  /**
   * Replace a container podman can no longer drive. When its monitor (conmon) is killed, podman waits for an
   * exit file nobody writes: `stop` fails after its timeout and leaves the container `stopping` (or `stopped`
   * with exit code -1), and `start` can fail the same way. Everything the machine is lives outside podman
   * (disk chain, channel directory, address), so whatever is left of the container's processes
   * is killed, the container is force-removed and created again on the same disk.
   */
  private async recreate(rec: MachineRecord): Promise<void> {
    this.killCgroup(rec);
    await this.podman(['rm', '--force', '--time', '0', containerName(rec.id)], { allowFail: true });
    if ((await this.inspect(rec.id)) !== null) throw ERRORS.podmanCannotRemoveBroken();
    await this.podmanCreate(rec);
  }

  /** SIGKILL every process left in the container's cgroup (thawed first: a frozen task cannot die). */
  private killCgroup(rec: MachineRecord): void {
    if (!rec.ctrId) return;
    const cg = `/libpod_parent/libpod-${rec.ctrId}`;
    try {
      fs.writeFileSync(path.join('/sys/fs/cgroup/freezer', cg, 'freezer.state'), 'THAWED');
    } catch {
      /* no freezer cgroup: nothing frozen */
    }
    for (const h of ['freezer', 'pids']) {
      let procs: string[] = [];
      try {
        procs = fs.readFileSync(path.join('/sys/fs/cgroup', h, cg, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
      } catch {
        continue;
      }
      for (const p of procs) {
        try {
          process.kill(Number(p), 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
    }
  }

  /** `podman start`; a container podman cannot start (conmon was killed under it) is replaced once. */
  private async podmanStart(rec: MachineRecord): Promise<void> {
    const r = await this.podman(['start', containerName(rec.id)], { allowFail: true });
    if (r.code === 0) return;
    this.cfg.warn?.(`container substrate: ${rec.id} could not be started (${r.stderr.trim().split('\n').pop() ?? ''}); replacing its container`);
    await this.recreate(rec);
    await this.podman(['start', containerName(rec.id)]);
  }

  /** Addresses held by this root's machines (their records). */
  private usedAddresses(): string[] {
    // A machine partially created has no record.
    return this.records.all().flatMap((r) => (r.address ? [r.address] : []));
  }

  async start(id: string): Promise<void> {
    const rec = this.record(id);
    if (rec.place !== 'reach' || !fs.existsSync(this.placed(rec).channel)) await this.placeInReach(rec);
    // A stale socket from the last run would look like a live agent to a client probing the path. A machine made
    // before enrollment existed also has the agent key itself in the channel directory (`token`): never again.
    fs.rmSync(this.channelPath(id), { force: true });
    fs.rmSync(path.join(this.placed(rec).channel, 'token'), { force: true });
    await this.mount(rec);
    if (rec.network === 'outbound') {
      // The bridge is never used without the guard that keeps machines off the host's own services.
      await this.ensureOutboundRules();
      if (!rec.address || !inSubnet(this.net, rec.address)) {
        // A machine made before its root had its own subnet (or before addresses were fixed at create): a new
        // address in this root's subnet, and its container made again with it (the port guard needs both).
        rec.address = allocateAddress(this.net, this.usedAddresses().filter((a) => a !== rec.address));
        this.writeRecord(rec);
        await this.recreate(rec);
      }
      await this.startGuarded(rec);
    } else await this.podmanStart(rec);
    rec.boot = bootId();
    this.writeRecord(rec);
  }

  /**
   * Start an outbound machine and guard its bridge port: only its own MAC and address in (as a VM's tap), so
   * a guest cannot answer ARP for a neighbour's address or forge a neighbour's source. CNI makes the port
   * (a veth with a random name) inside `podman start`; starts run one at a time per root, and this root's
   * bridge is its own, so the port that appeared during this start is this machine's.
   */
  private startGuarded(rec: MachineRecord): Promise<void> {
    const next = this.portLock.then(async () => {
      const before = new Set(bridgePorts(this.net.bridge));
      if (rec.port) await removePortGuard(rec.port);
      await this.podmanStart(rec);
      const added = bridgePorts(this.net.bridge).filter((p) => !before.has(p));
      if (added.length !== 1) {
        await this.podman(['stop', '-t', '0', containerName(rec.id)], { allowFail: true });
        throw ERRORS.bridgePortUnknown();
      }
      rec.port = added[0]!;
      try {
        await guardPort(rec.port, macFor(rec.address!), rec.address!);
      } catch (e) {
        await this.podman(['stop', '-t', '0', containerName(rec.id)], { allowFail: true });
        throw e;
      }
      isolateBridgePorts(this.net.bridge);
    });
    this.portLock = next.catch(() => {});
    return next;
  }

  private outboundBridge(): OutboundBridge {
    return { bridge: this.net.bridge, subnet: this.net.subnet, forwardChain: forwardChainName(this.net.bridge) };
  }

  /**
   * Give this root's network back (tests, operators removing a data directory; its machines destroyed first):
   * host rules, the bridge, the registry entry.
   */
  async removeNetwork(): Promise<void> {
    await removeOutboundRules(this.outboundBridge());
    await removeBridge(this.net.bridge);
    releaseMachineNet({ root: this.cfg.root, ...(this.cfg.netRegistry ? { registry: this.cfg.netRegistry } : {}) });
    this.outboundRules = null;
  }

  private ensureOutboundRules(): Promise<void> {
    this.outboundRules ??= installOutboundRules(this.outboundBridge()).catch((e) => {
      this.outboundRules = null;
      throw ERRORS.networkSetupFailed(e);
    });
    return this.outboundRules;
  }

  /** Remove a stopped machine's port guard (its veth went with the container). */
  private async unguard(rec: MachineRecord): Promise<void> {
    if (!rec.port) return;
    await removePortGuard(rec.port);
    delete rec.port;
    this.writeRecord(rec);
  }

  async stop(id: string, opts: { timeoutMs?: number } = {}): Promise<void> {
    const rec = this.record(id);
    const secs = Math.max(1, Math.ceil((opts.timeoutMs ?? this.cfg.stopTimeoutMs ?? 10_000) / 1000));
    // podman stop sends SIGTERM (the init stops the agent and the desktop, syncs) and SIGKILLs after the timeout.
    const r = await this.podman(['stop', '-t', String(secs), containerName(id)], { allowFail: true });
    if (r.code !== 0 || this.liveCgroup(rec) !== null) {
      // podman could not stop it (conmon killed, container record gone): kill what is left and replace the
      // container, so the machine can start again. Never a stop reported that did not happen.
      this.cfg.warn?.(`container substrate: ${id} did not stop through podman (${r.stderr.trim().split('\n').pop() ?? ''}); replacing its container`);
      const old = { ...rec };
      await this.recreate(rec);
      if (this.liveCgroup(old) !== null) throw ERRORS.machineNotStopped();
    }
    await this.unguard(rec);
    await unmount(this.placed(rec).merged);
    fs.rmSync(this.channelPath(id), { force: true });
  }

  private async inspect(id: string): Promise<{ status: string; cgroup: string } | null> {
    const r = await this.podman(['inspect', '--format', '{{.State.Status}} {{.State.CgroupPath}}', containerName(id)], { allowFail: true });
    if (r.code !== 0) return null;
    const [status = '', cgroup = ''] = r.stdout.trim().split(' ');
    return { status, cgroup };
  }

  private async containerState(id: string): Promise<string | null> {
    return (await this.inspect(id))?.status ?? null;
  }

  async status(id: string): Promise<SubstrateStatus> {
    assertMachineId(id);
    if (!this.records.has(id)) return 'absent';
    const rec = this.record(id);
    if (!this.disks.hasDisk(rec.disk)) return 'lost';
    const st = await this.containerState(id);
    if (st === null) return 'lost';
    if (st === 'running' || st === 'paused') return rec.boot === undefined || rec.boot === bootId() ? 'running' : 'lost';
    return 'stopped';
  }

  /**
   * For the substrate watch (every two seconds per running machine): a container whose cgroup has processes
   * is running without asking podman; only one that has none costs a `podman inspect`, which tells a clean
   * guest shutdown (the init exits 0 on SIGTERM) from a kill or a crash.
   */
  async liveness(id: string): Promise<Liveness> {
    assertMachineId(id);
    if (!this.records.has(id)) return 'absent';
    const rec = this.record(id);
    const cg = this.liveCgroup(rec);
    if (cg) {
      if (rec.boot !== undefined && rec.boot !== bootId()) return 'lost';
      return frozenState(freezerStatePath(cg)) && !this.capturing.has(id) ? 'frozen' : 'running';
    }
    const r = await this.podman(['inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}', containerName(id)], { allowFail: true });
    if (r.code !== 0) return 'lost';
    const [status = '', code = ''] = r.stdout.trim().split(' ');
    if (status === 'running' || status === 'paused') {
      // podman still says running, but the cgroup is empty: its monitor (conmon) died with the container.
      if (this.cgroupsReadable(rec)) return 'crashed';
      return status === 'paused' && !this.capturing.has(id) ? 'frozen' : 'running';
    }
    if (status === 'exited' || status === 'stopped') return code === '0' ? 'shutdown' : 'crashed';
    return 'crashed';
  }

  /** Whether liveCgroup's answer can be trusted (cgroup v1 freezer with podman's cgroupfs layout). */
  private cgroupsReadable(rec: MachineRecord): boolean {
    return !!rec.ctrId && fs.existsSync('/sys/fs/cgroup/freezer/libpod_parent');
  }

  /**
   * The cgroup (relative to a hierarchy) of a container that has running processes, known without a podman
   * call (~40 ms): cgroupfs puts podman's containers at /libpod_parent/libpod-<id>, and the cgroup exists with
   * members only while the container runs. Null when that cannot be told this way.
   */
  private liveCgroup(rec: MachineRecord): string | null {
    if (!rec.ctrId) return null;
    const cg = `/libpod_parent/libpod-${rec.ctrId}`;
    try {
      return fs.readFileSync(path.join('/sys/fs/cgroup/freezer', cg, 'cgroup.procs'), 'utf8').trim() ? cg : null;
    } catch {
      return null;
    }
  }

  /**
   * What a running machine holds in memory, from its memory cgroup (memory.ts: usage less inactive file cache),
   * and the host pids of its processes (for a per-process breakdown). Null when it is not running or its
   * cgroup is not where cgroupfs puts podman's containers.
   */
  memory(id: string): (CgroupMemory & { pids: number[] }) | null {
    assertMachineId(id);
    if (!this.records.has(id)) return null;
    const cg = this.liveCgroup(this.record(id));
    if (!cg) return null;
    const dir = path.join('/sys/fs/cgroup/memory', cg);
    const mem = readCgroupMemory((name) => {
      try {
        return fs.readFileSync(path.join(dir, name), 'utf8');
      } catch {
        return null;
      }
    });
    if (!mem) return null;
    let pids: number[] = [];
    try {
      pids = fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      /* gone meanwhile: no breakdown */
    }
    return { ...mem, pids };
  }

  async capture(id: string, holder: string): Promise<CaptureResult> {
    const rec = this.record(id);
    const fast = this.liveCgroup(rec);
    const info = fast ? { status: 'running', cgroup: fast } : await this.inspect(id);
    if (info?.status === 'running') {
      // Live: the overlay's upper directory cannot be swapped under a mounted overlay, so the container is
      // frozen (cgroup freezer) while its upper layer is duplicated: a btrfs snapshot (constant time), or a
      // copy whose time grows with what the machine wrote since its disk was last mounted.
      this.capturing.add(id);
      try {
        const thaw = await this.freeze(rec, info.cgroup);
        try {
          faultPoint('container.capture.frozen');
          return captured(await this.disks.copyToLayer(rec.disk, holder), true);
        } finally {
          await thaw();
        }
      } finally {
        this.capturing.delete(id);
      }
    }
    // Stopped: the writable directory becomes the layer in place (a rename-free O(1) freeze).
    await unmount(this.placed(rec).merged);
    return this.machineDisks.freezeStopped(rec.disk, holder);
  }

  /**
   * Freeze every process of the container; returns the thaw. Writes the cgroup v1 freezer directly (about a
   * millisecond) when podman's cgroup is where cgroupfs puts it, else falls back to podman pause/unpause.
   * Decide and record, act, record the outcome: the freeze is written to the machine's record before it is
   * made and cleared only once the container is thawed (a control plane killed in between: thawLeftovers).
   */
  private async freeze(rec: MachineRecord, cg: string): Promise<() => Promise<void>> {
    const state = freezerStatePath(cg);
    const how: Freeze = state && fs.existsSync(state) ? { how: 'cgroup', cgroup: cg } : { how: 'podman' };
    this.writeRecord({ ...this.record(rec.id), frozen: how });
    const thaw = () => this.thawAs(rec.id, how);
    try {
      if (how.how === 'podman') await this.podman(['pause', containerName(rec.id)]);
      else {
        fs.writeFileSync(state, 'FROZEN');
        const end = Date.now() + 5000;
        while (fs.readFileSync(state, 'utf8').trim() !== 'FROZEN') {
          if (Date.now() > end) throw ERRORS.containerNotFrozen();
          await new Promise((res) => setTimeout(res, 1));
        }
      }
    } catch (e) {
      await thaw();
      throw e;
    }
    return thaw;
  }

  /** Thaw a container frozen `how`, then clear the freeze from its record (kept if the thaw failed). */
  private async thawAs(id: string, how: Freeze): Promise<void> {
    if (how.how === 'podman') {
      const r = await this.podman(['unpause', containerName(id)], { allowFail: true });
      // Not paused (any more) is thawed; anything else is kept for the watch to try again.
      if (r.code !== 0 && (await this.containerState(id)) === 'paused') throw ERRORS.podmanCannotUnpause();
    } else {
      const state = freezerStatePath(how.cgroup);
      // A cgroup that is gone (the container stopped meanwhile) has nothing left to thaw.
      if (state && fs.existsSync(state)) fs.writeFileSync(state, 'THAWED');
    }
    const now = this.record(id);
    if (now.frozen) {
      delete now.frozen;
      this.writeRecord(now);
    }
  }

  /**
   * Thaw a running machine the watch found frozen with no capture of this process in flight (liveness
   * `frozen`): what a killed control plane left, or a freeze made from outside. Undone where liveness saw it:
   * the cgroup's freezer when it could read it, else podman's pause.
   */
  async thaw(id: string): Promise<void> {
    const cg = this.liveCgroup(this.record(id));
    await this.thawAs(id, cg ? { how: 'cgroup', cgroup: cg } : { how: 'podman' });
  }

  pinLayer: Layers['pinLayer'] = (layerId, holder) => this.machineDisks.pinLayer(layerId, holder);
  releaseLayer: Layers['releaseLayer'] = (layerId, holder) => this.machineDisks.releaseLayer(layerId, holder);
  layerPins: Layers['layerPins'] = () => this.machineDisks.layerPins();

  async replaceDisk(id: string, source: DiskSource): Promise<void> {
    const rec = this.record(id);
    if ((await this.containerState(id)) === 'running') throw ERRORS.stopBeforeReplacingDisk();
    await unmount(this.placed(rec).merged);
    await this.machineDisks.replace(rec.disk, source);
  }

  /**
   * Unmount whatever is still mounted under this substrate's root and its reach dir: podman's overlay storage
   * driver keeps `<root>/podman/root/overlay` bind-mounted on itself after its last container, so removing a
   * whole substrate root (tests, an operator deleting a data directory) would fail with EBUSY. Destroy the
   * machines first; this only lets go of the host side: the mounts (idmapped base views included), the root's
   * network (removeNetwork), so no bridge outlives its root, and its reach dir once nothing is mounted there.
   */
  async releaseMounts(): Promise<void> {
    await this.removeNetwork();
    const under = [this.cfg.root, this.reachDir].map((d) => path.resolve(d) + '/');
    const targets = fs
      .readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[4])
      .filter((t): t is string => !!t && under.some((d) => (t + '/').startsWith(d)))
      .sort((a, b) => b.length - a.length);
    for (const t of targets) await execFileP('umount', ['-l', t]).catch(() => {});
    if (!targets.some((t) => isMounted(t))) fs.rmSync(this.reachDir, { recursive: true, force: true });
  }

  async destroy(id: string): Promise<void> {
    assertMachineId(id);
    const dir = this.machineDir(id);
    let rec: MachineRecord | null = null;
    try {
      rec = this.record(id);
    } catch {
      /* partially created */
    }
    await this.podman(['rm', '--force', '--time', '0', containerName(id)], { allowFail: true });
    if (rec?.port) await removePortGuard(rec.port);
    // Both places: a create killed before its record was written has made the reach one.
    const places = (['reach', 'root'] as const).map((place) => this.placed({ id, place }));
    for (const p of places) await unmount(p.merged);
    // A create killed between making the disk and writing the record leaves a disk no record names.
    await this.machineDisks.delete(id, rec?.disk);
    fs.rmSync(places[0]!.dir, { recursive: true, force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  }

  openChannel(id: string): Promise<Duplex> {
    this.record(id);
    return openUnixChannel(this.channelPath(id));
  }

  /**
   * A warm member becomes a tenant's: a fresh identity in its root (host side, as at create; the member has run
   * nothing of anyone's), the new hostname in its running UTS namespace (the host's own
   * `hostname` through nsenter: no guest binary runs with the privilege) and in podman's bind-mounted
   * /etc/hostname (written in place, so the mount keeps its file), and in its record, so a recreate keeps it.
   */
  async reidentify(id: string): Promise<void> {
    const rec = this.record(id);
    const r = await this.podman(['inspect', '--format', '{{.State.Pid}} {{.HostnamePath}}', containerName(id)]);
    const [pid, hostnamePath] = r.stdout.trim().split(' ');
    if (!pid || !/^[1-9]\d*$/.test(pid)) throw ERRORS.machineLost();
    const identity = newIdentity();
    const { hostname } = identity;
    writeGuestIdentity(this.placed(rec).merged, identity, this.uidBase);
    rec.hostname = hostname;
    this.writeRecord(rec);
    await execFileP('nsenter', ['--target', pid, '--uts', '--', 'hostname', hostname]);
    if (hostnamePath) fs.writeFileSync(hostnamePath, `${hostname}\n`);
  }

  async issueEnrollment(id: string): Promise<string | null> {
    this.record(id);
    return dropEnrollmentSecret(path.dirname(this.channelPath(id)));
  }

  async diskUsage(id: string): Promise<DiskUsage> {
    return this.machineDisks.usage(this.record(id).disk);
  }

  diskVolume(): DiskVolume | null {
    if (!this.volume) return null;
    return { readOnly: readOnlyFs(this.disks.root), backingDir: this.volume === 'loop' ? this.cfg.root : null };
  }

  /**
   * Mount the loop volume again after the kernel forced it read-only. What keeps it busy is let go first: every
   * machine's overlay (its upper directory is on the volume) and any container still running on one (stopped
   * as a user's stop would). Then the layer store writes its state again and collects blobs nothing names: a
   * state file or deletion the aborted transaction never committed.
   */
  async remountDiskVolume(): Promise<void> {
    if (this.volume !== 'loop') throw ERRORS.diskVolumeNotRemountable();
    for (const id of this.records.ids()) {
      await this.stop(id, { timeoutMs: 1000 }).catch(() => unmount(this.mergedPath(id)));
    }
    await this.disks.settled();
    await remountLoopVolume({ dir: this.disks.root, image: path.join(this.cfg.root, 'disks.btrfs') });
    await this.disks.resync();
  }

  async reattach(): Promise<Array<{ id: string; status: SubstrateStatus }>> {
    await this.leftoverFreezes;
    const out: Array<{ id: string; status: SubstrateStatus }> = [];
    for (const id of this.records.ids()) {
      let status = await this.status(id);
      // After a host reboot podman may still list the container while its overlay mount is gone.
      if (status === 'running' && !isMounted(this.mergedPath(id))) status = 'lost';
      out.push({ id, status });
    }
    return out;
  }
}
