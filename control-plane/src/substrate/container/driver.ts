/**
 * The container substrate: rootful podman + runc running the guest image's root on each machine's own
 * overlayfs chain (base root <- captured layers <- writable upper), mounted by us and handed to
 * `podman --rootfs`. Containers run in a user namespace over the root's private uid range, without most
 * capabilities, with a guarded bridge port and a disk quota (docs/security.md); they still share the host's
 * kernel: weaker isolation than a VM (Chromium runs without its sandbox here).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { promisify } from 'node:util';
import { faultPoint } from '../../fault-points.js';
import type { LayerStore } from '../disks/layer-store.js';
import { captured, MachineDisks } from '../disks/machine-disks.js';
import { readOnlyFs, remountLoopVolume } from '../disks/btrfs.js';
import { isMounted, mountOverlay, unmount } from '../disks/overlay-backend.js';
import {
  assertMachineId,
  dropEnrollmentSecret,
  openUnixChannel,
  type CaptureResult,
  type CreateSpec,
  type DiskSource,
  type DiskUsage,
  type DiskVolume,
  type Layers,
  type Liveness,
  type Substrate,
  type SubstrateStatus,
} from '../substrate.js';
import type { MachineNet } from '../net/machine-net.js';
import { removePortGuard } from '../net/host-net.js';
import { ContainerBridge } from '../net/container-bridge.js';
import { MachineRecords } from '../records.js';
import { bootId, cgroupsReadable, freezerStatePath, frozenState, liveCgroup } from './cgroup.js';
import { MachineContainers } from './containers.js';
import { Freezer } from './freezer.js';
import { idmappedBase } from './idmap.js';
import { containerChannelPath, type MachineRecord } from './machine-record.js';
import { Podman } from './podman.js';
import { guestRange, preparePodman, rootDisks, type RootDisks } from './root-setup.js';
import { assertGuestReaches, machineDirs, makeMachinePlace, makeReachDir, reachDirFor, type MachineDirs } from './reach.js';
import { cniConflist, containerName, networkConfigDir, type PodmanEnv } from './podman-argv.js';
import { readCgroupMemory, type CgroupMemory } from './memory.js';
import { newIdentity, writeGuestIdentity } from '../identity.js';
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

export { containerChannelPath, containerEarlyChannel } from './machine-record.js';

export class ContainerSubstrate implements Substrate {
  readonly kind = 'container' as const;
  readonly disks: LayerStore;
  private readonly machineDisks: MachineDisks;
  private readonly records: MachineRecords<MachineRecord>;
  readonly env: PodmanEnv;
  /** How live captures duplicate the writable layer (see `disks` in the config). */
  readonly diskMode: 'snapshot' | 'copy';
  /** This root's own bridge and subnet, its host rules and its machines' addresses and port guards. */
  private readonly bridge: ContainerBridge;
  readonly net: MachineNet;
  private readonly podman: Podman;
  private readonly freezer: Freezer;
  private readonly containers: MachineContainers;
  /**
   * Host uid of guest root: the root's private range (idmap.ts), fixed when the root is made. Null for a root
   * that already held machines before ranges existed (their layers hold host uid 0 files).
   */
  readonly uidBase: number | null;
  /** Where the disks' btrfs lives: the root's own filesystem, a loop volume file, or none (plain directory). */
  private readonly volume: RootDisks['volume'];
  /** The thaw of freezes a killed control plane left (started by the constructor; reattach waits for it). */
  private readonly leftoverFreezes: Promise<void>;
  /** What guest root must reach (reach.ts): machines' mount points and channel directories. */
  readonly reachDir: string;

  constructor(private readonly cfg: ContainerSubstrateConfig) {
    fs.mkdirSync(cfg.root, { recursive: true, mode: 0o700 });
    this.env = preparePodman(cfg.root, cfg.runDir);
    this.podman = new Podman(this.env);
    this.bridge = new ContainerBridge({ root: cfg.root, ...(cfg.netRegistry ? { registry: cfg.netRegistry } : {}) });
    this.net = this.bridge.net;
    fs.writeFileSync(path.join(networkConfigDir(this.env), 'computer.conflist'), cniConflist(this.env, this.net));
    this.records = new MachineRecords(cfg.root);
    this.freezer = new Freezer(this.podman, this.records, cfg.warn);
    this.uidBase = guestRange(cfg.root, this.net.index, this.records.entries().length > 0, cfg.warn);
    // runc mounts the machine's root and channel as guest root (host uid uidBase): it must pass every directory
    // above them, and no host user but root may enter them. They live outside the root (DATA_DIR stays 0700),
    // and a host where guest root still cannot reach them is told so now, not at the first start.
    this.reachDir = cfg.reachDir ?? reachDirFor(cfg.root);
    makeReachDir(this.reachDir, this.uidBase);
    if (this.uidBase !== null) assertGuestReaches(this.reachDir, this.uidBase);
    const disks = rootDisks(cfg);
    this.disks = disks.disks;
    this.diskMode = disks.diskMode;
    this.volume = disks.volume;
    this.machineDisks = new MachineDisks(this.disks, cfg.baseRootfs);
    this.containers = new MachineContainers({ podman: this.podman, records: this.records, uidBase: this.uidBase, placed: (rec) => this.placed(rec), ...(cfg.warn ? { warn: cfg.warn } : {}) });
    this.leftoverFreezes = this.freezer.thawLeftovers();
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
    makeMachinePlace({ root: this.cfg.root, reach: this.reachDir }, spec.id, this.uidBase);
    const disk = await this.machineDisks.make(spec);
    const identity = newIdentity();
    const rec: MachineRecord = {
      id: spec.id, resources: spec.resources, disk: disk.id, network: spec.network ?? 'none', place: 'reach', hostname: identity.hostname,
    };
    if (rec.network === 'outbound') {
      rec.address = this.bridge.addresses.reserve(this.usedAddresses());
    }
    try {
      this.writeRecord(rec);
      await this.mount(rec);
      // Before the guest ever runs: its own machine-id (a fork's or template's disk holds its source's).
      writeGuestIdentity(this.placed(rec).merged, identity, this.uidBase);
      faultPoint('container.create.before_podman');
      await this.containers.create(rec);
    } catch (e) {
      await this.destroy(spec.id).catch(() => {});
      throw e;
    } finally {
      if (rec.address) this.bridge.addresses.release(rec.address);
    }
    if (opts.start !== false) await this.start(spec.id);
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
    makeMachinePlace({ root: this.cfg.root, reach: this.reachDir }, rec.id, this.uidBase);
    rec.place = 'reach';
    this.writeRecord(rec);
    await this.containers.recreate(rec);
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
      await this.bridge.ensureRules();
      const address = this.bridge.addresses.readdress(rec.address, this.usedAddresses());
      if (address !== null) {
        // A machine made before its root had its own subnet (or before addresses were fixed at create): a new
        // address in this root's subnet, and its container made again with it (the port guard needs both).
        rec.address = address;
        this.writeRecord(rec);
        await this.containers.recreate(rec);
      }
      await this.startGuarded(rec);
    } else await this.containers.start(rec);
    rec.boot = bootId();
    this.writeRecord(rec);
  }

  /** Start an outbound machine with its bridge port guarded (net/container-bridge.ts). */
  private async startGuarded(rec: MachineRecord): Promise<void> {
    rec.port = await this.bridge.startGuarded(rec.address!, rec.port, () => this.containers.start(rec), () =>
      this.podman.run(['stop', '-t', '0', containerName(rec.id)], { allowFail: true }),
    );
  }

  /**
   * Give this root's network back (tests, operators removing a data directory; its machines destroyed first):
   * host rules, the bridge, the registry entry.
   */
  removeNetwork(): Promise<void> {
    return this.bridge.remove();
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
    const r = await this.podman.run(['stop', '-t', String(secs), containerName(id)], { allowFail: true });
    if (r.code !== 0 || liveCgroup(rec.ctrId) !== null) {
      // podman could not stop it (conmon killed, container record gone): kill what is left and replace the
      // container, so the machine can start again. Never a stop reported that did not happen.
      this.cfg.warn?.(`container substrate: ${id} did not stop through podman (${r.stderr.trim().split('\n').pop() ?? ''}); replacing its container`);
      const old = { ...rec };
      await this.containers.recreate(rec);
      if (liveCgroup(old.ctrId) !== null) throw ERRORS.machineNotStopped();
    }
    await this.unguard(rec);
    await unmount(this.placed(rec).merged);
    fs.rmSync(this.channelPath(id), { force: true });
  }

  async status(id: string): Promise<SubstrateStatus> {
    assertMachineId(id);
    if (!this.records.has(id)) return 'absent';
    const rec = this.record(id);
    if (!this.disks.hasDisk(rec.disk)) return 'lost';
    const st = await this.podman.state(id);
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
    const cg = liveCgroup(rec.ctrId);
    if (cg) {
      if (rec.boot !== undefined && rec.boot !== bootId()) return 'lost';
      return frozenState(freezerStatePath(cg)) && !this.freezer.isCapturing(id) ? 'frozen' : 'running';
    }
    const r = await this.podman.run(['inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}', containerName(id)], { allowFail: true });
    if (r.code !== 0) return 'lost';
    const [status = '', code = ''] = r.stdout.trim().split(' ');
    if (status === 'running' || status === 'paused') {
      // podman still says running, but the cgroup is empty: its monitor (conmon) died with the container.
      if (cgroupsReadable(rec.ctrId)) return 'crashed';
      return status === 'paused' && !this.freezer.isCapturing(id) ? 'frozen' : 'running';
    }
    if (status === 'exited' || status === 'stopped') return code === '0' ? 'shutdown' : 'crashed';
    return 'crashed';
  }

  /**
   * What a running machine holds in memory, from its memory cgroup (memory.ts: usage less inactive file cache),
   * and the host pids of its processes (for a per-process breakdown). Null when it is not running or its
   * cgroup is not where cgroupfs puts podman's containers.
   */
  memory(id: string): (CgroupMemory & { pids: number[] }) | null {
    assertMachineId(id);
    if (!this.records.has(id)) return null;
    const cg = liveCgroup(this.record(id).ctrId);
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
    const fast = liveCgroup(rec.ctrId);
    const info = fast ? { status: 'running', cgroup: fast } : await this.podman.inspect(id);
    if (info?.status === 'running') {
      // Live: the overlay's upper directory cannot be swapped under a mounted overlay, so the container is
      // frozen (cgroup freezer) while its upper layer is duplicated: a btrfs snapshot (constant time), or a
      // copy whose time grows with what the machine wrote since its disk was last mounted.
      return this.freezer.whileFrozen(rec, info.cgroup, async () => {
        faultPoint('container.capture.frozen');
        return captured(await this.disks.copyToLayer(rec.disk, holder), true);
      });
    }
    // Stopped: the writable directory becomes the layer in place (a rename-free O(1) freeze).
    await unmount(this.placed(rec).merged);
    return this.machineDisks.freezeStopped(rec.disk, holder);
  }

  /** Thaw a running machine the watch found frozen with no capture of this process in flight (freezer.ts). */
  async thaw(id: string): Promise<void> {
    await this.freezer.thaw(this.record(id));
  }

  pinLayer: Layers['pinLayer'] = (layerId, holder) => this.machineDisks.pinLayer(layerId, holder);
  releaseLayer: Layers['releaseLayer'] = (layerId, holder) => this.machineDisks.releaseLayer(layerId, holder);
  layerPins: Layers['layerPins'] = () => this.machineDisks.layerPins();

  async replaceDisk(id: string, source: DiskSource): Promise<void> {
    const rec = this.record(id);
    if ((await this.podman.state(id)) === 'running') throw ERRORS.stopBeforeReplacingDisk();
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
    await this.podman.run(['rm', '--force', '--time', '0', containerName(id)], { allowFail: true });
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
    const r = await this.podman.run(['inspect', '--format', '{{.State.Pid}} {{.HostnamePath}}', containerName(id)]);
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
