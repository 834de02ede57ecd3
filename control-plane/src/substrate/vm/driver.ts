/**
 * The vm substrate: one daemonized qemu-system-x86_64 (microvm) per running machine, on the machine's qcow2
 * writable layer. QEMU outlives the control plane; a restart re-attaches through the pid file and sockets.
 * The agent channel is a virtio-serial port whose host end is a unix socket in the machine's 0700 run dir.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { promisify } from 'node:util';
import { LayerStore } from '../disks/layer-store.js';
import { Qcow2Backend } from '../disks/qcow2-backend.js';
import { captured, MachineDisks } from '../disks/machine-disks.js';
import {
  assertMachineId,
  cannotReidentify,
  cannotThaw,
  noDiskVolume,
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
import { buildQemuArgv, vmFiles, vmProcessName } from './argv.js';
import type { HostNet } from '../net/host-net.js';
import { hostTscKhz, probeKvm, type KvmVerdict } from './kvm-probe.js';
import { VmBridge } from '../net/vm-bridge.js';
import { nicFor, type VmNetwork, type VmNetworkConfig } from '../net/network.js';
import { Qmp } from './qmp.js';
import { MachineRecords, machineDirOf } from '../records.js';
import { newIdentity, type MachineIdentity } from '../identity.js';
import { ERRORS } from '../../errors.js';

const execFileP = promisify(execFile);

export interface VmSubstrateConfig {
  /** Disk layers and machine run directories. Keep it short: unix socket paths are limited to 107 bytes. */
  root: string;
  kernel: string;
  initrd: string;
  baseDisk: string;
  /** Force an accelerator; by default KVM when the probe finds it usable, TCG otherwise. */
  accel?: 'kvm' | 'tcg';
  stopTimeoutMs?: number;
  /** Warnings (e.g. running under TCG). */
  warn?: (msg: string) => void;
  /**
   * Outbound networking (machines created with network 'outbound'): bridge, subnet, nameservers. One
   * substrate root per bridge: addresses are allocated from this root's machine records. Without a bridge
   * and subnet here, the root gets its own from the host-wide registry (net/machine-net.ts).
   */
  network?: VmNetworkConfig;
  /** Host-wide registry of machine networks; default /var/lib/computer/networks. */
  netRegistry?: string;
  /** Host networking operations; the real ones by default. */
  hostNet?: HostNet;
}

interface VmRecord {
  id: string;
  resources: MachineResources;
  disk: string;
  network: 'none' | 'outbound';
  /** outbound: the machine's IPv4 address on the bridge, kept for its whole life (released at destroy). */
  address?: string;
  /** What the control plane last asked for: a running record whose process is gone is lost. */
  desired: 'running' | 'stopped';
  /** QEMU node name of the active disk layer (changes at each live capture). */
  diskNode: string;
  captures: number;
  /** A live capture in flight: QEMU is being switched to node `node` on the file `blob` (see settleCapture). */
  pending?: { node: string; blob: string };
  /**
   * The guest's machine-id and hostname (identity.ts), given at create and passed at every boot, so a restart
   * and a restore keep them whatever the disk holds; a fork is a create (a new one). Absent: recorded before
   * machines had their own, and booted as the image's `computer`.
   */
  identity?: MachineIdentity;
}

/** A VM's agent socket under a substrate root (see containerChannelPath). */
export function vmChannelPath(root: string, id: string): string {
  assertMachineId(id);
  return vmFiles(machineDirOf(root, id)).agentSocket;
}

/** The channel of a machine under a substrate root, usable before the substrate object exists (machine-host.ts). */
export function vmEarlyChannel(root: string): EarlyChannel {
  return {
    channelPath: (id) => vmChannelPath(root, id),
    // No secret: only the host holds the virtio-serial port's other end, so the channel is the proof.
    issueEnrollment: async (id) => {
      assertMachineId(id);
      return null;
    },
  };
}

export class VmSubstrate implements Substrate {
  readonly kind = 'vm' as const;
  readonly disks: LayerStore;
  private readonly machineDisks: MachineDisks;
  private readonly records: MachineRecords<VmRecord>;
  readonly accel: 'kvm' | 'tcg';
  readonly kvm: KvmVerdict;
  private readonly tscKhz: number | null;
  readonly network: VmNetwork;
  /** The root's bridge, its machines' addresses and taps (net/vm-bridge.ts). */
  private readonly bridge: VmBridge;
  /** Machines between tap creation and QEMU's pid file: their tap has no process yet and must not be reaped. */
  private readonly starting = new Set<string>();

  constructor(private readonly cfg: VmSubstrateConfig) {
    this.records = new MachineRecords(cfg.root);
    this.disks = new LayerStore(path.join(cfg.root, 'disks'), new Qcow2Backend());
    this.machineDisks = new MachineDisks(this.disks, cfg.baseDisk);
    this.kvm = probeKvm();
    this.accel = cfg.accel ?? (this.kvm.usable ? 'kvm' : 'tcg');
    this.tscKhz = this.accel === 'tcg' ? hostTscKhz() : null;
    this.bridge = new VmBridge({
      root: cfg.root,
      ...(cfg.network ? { network: cfg.network } : {}),
      ...(cfg.netRegistry ? { registry: cfg.netRegistry } : {}),
      ...(cfg.hostNet ? { hostNet: cfg.hostNet } : {}),
    });
    this.network = this.bridge.network;
    if (this.accel === 'tcg') cfg.warn?.(`vm substrate: KVM unusable (${this.kvm.usable ? 'forced tcg' : this.kvm.reason}); machines run under TCG emulation, much slower`);
  }

  private runDir(id: string): string {
    return this.records.dir(id);
  }
  channelPath(id: string): string {
    return vmChannelPath(this.cfg.root, id);
  }

  private record(id: string): VmRecord {
    return this.records.read(id);
  }
  private writeRecord(rec: VmRecord): void {
    this.records.write(rec);
  }

  /** The QEMU pid if its process is alive and is this machine's (pid files outlive reboots and pids are reused). */
  private pid(id: string): number | null {
    let pid: number;
    try {
      pid = Number(fs.readFileSync(vmFiles(this.runDir(id)).pidFile, 'utf8').trim());
    } catch {
      return null;
    }
    if (!Number.isInteger(pid) || pid <= 1) return null;
    try {
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return cmdline.includes(`${vmProcessName(id)},process=${vmProcessName(id)}`) ? pid : null;
    } catch {
      return null;
    }
  }

  /**
   * Give this root's own bridge and subnet back (tests, operators removing a data directory; machines
   * destroyed first). A bridge the operator configured is left alone.
   */
  removeNetwork(): Promise<void> {
    return this.bridge.remove();
  }

  async create(spec: CreateSpec, opts: { start?: boolean } = {}): Promise<void> {
    assertMachineId(spec.id);
    const dir = this.runDir(spec.id);
    if (this.records.has(spec.id)) throw ERRORS.machineExistsOnSubstrate();
    const network = spec.network ?? 'none';
    const address = network === 'outbound' ? this.bridge.addresses.reserve(this.usedAddresses()) : undefined;
    try {
      await this.prepare(spec, dir, network, address);
    } finally {
      if (address) this.bridge.addresses.release(address);
    }
    if (opts.start !== false) await this.start(spec.id);
  }

  private usedAddresses(): string[] {
    // A machine being created or destroyed has no record.
    return this.records.all().flatMap((r) => (r.address ? [r.address] : []));
  }

  private async prepare(spec: CreateSpec, dir: string, network: 'none' | 'outbound', address: string | undefined): Promise<void> {
    // Only the control plane enters the run dir: it holds the agent and QMP sockets.
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const disk = await this.machineDisks.make(spec);
    this.writeRecord({
      id: spec.id, resources: spec.resources, disk: disk.id, network, ...(address ? { address } : {}), desired: 'stopped', diskNode: 'disk0', captures: 0,
      // Its own, never its source's (a fork's or template's disk holds its source's files: the guest replaces them).
      identity: newIdentity(),
    });
  }

  /** The machine's tap device name (whether or not it exists). */
  tapName(id: string): string {
    return this.bridge.tapName(id);
  }

  argv(id: string): string[] {
    const rec = this.record(id);
    const d = this.disks.disk(rec.disk);
    return buildQemuArgv({
      id,
      resources: rec.resources,
      accel: this.accel,
      network: rec.network === 'outbound' && rec.address ? nicFor(this.network, this.cfg.root, id, rec.address) : 'none',
      diskNode: rec.diskNode,
      ...(this.tscKhz ? { tscKhz: this.tscKhz } : {}),
      ...(rec.identity ? { identity: rec.identity } : {}),
      paths: { kernel: this.cfg.kernel, initrd: this.cfg.initrd, disk: this.disks.blobPath(d.writable), runDir: this.runDir(id) },
    });
  }

  async start(id: string): Promise<void> {
    const rec = this.record(id);
    if (this.pid(id) !== null) return;
    const f = vmFiles(this.runDir(id));
    for (const p of [f.agentSocket, f.qmpSocket, f.pidFile]) fs.rmSync(p, { force: true });
    // A fresh process opens the disk under its first node name again.
    rec.diskNode = 'disk0';
    delete rec.pending;
    // Live captures lengthen a running disk's chain and cannot shorten it (QEMU reads the frozen files);
    // a start, with nothing reading the disk yet, is when a long chain is flattened.
    await this.disks.compactDisk(rec.disk, Math.ceil(this.disks.maxDepth / 2));
    // The operator moved the vm network since this machine last ran: a new address in the new subnet.
    const moved = rec.network === 'outbound' ? this.bridge.addresses.readdress(rec.address, this.usedAddresses()) : null;
    if (moved !== null) rec.address = moved;
    this.writeRecord(rec);
    this.starting.add(id);
    try {
      if (rec.network === 'outbound') {
        await this.bridge.addTap(id, rec.address!);
      }
      const [cmd, ...args] = this.argv(id);
      try {
        // -daemonize: the parent exits once the guest is set up; the VM outlives the control plane.
        await execFileP(cmd!, args);
      } catch (e) {
        await this.bridge.removeTap(id);
        throw ERRORS.qemuFailedToStart(e);
      }
    } finally {
      this.starting.delete(id);
    }
    rec.desired = 'running';
    this.writeRecord(rec);
  }

  /** A tap whose QEMU is gone (stopped, killed, crashed) is removed. */
  private async reapTap(id: string): Promise<void> {
    if (!this.starting.has(id) && this.pid(id) === null && this.bridge.tapExists(id)) await this.bridge.removeTap(id);
  }

  private async waitExit(id: string, ms: number): Promise<boolean> {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (this.pid(id) === null) return true;
      await new Promise((r) => setTimeout(r, 100));
    }
    return this.pid(id) === null;
  }

  async stop(id: string, opts: { timeoutMs?: number } = {}): Promise<void> {
    const rec = this.record(id);
    rec.desired = 'stopped';
    this.writeRecord(rec);
    if (this.pid(id) === null) return this.reapTap(id);
    const timeout = opts.timeoutMs ?? this.cfg.stopTimeoutMs ?? 30_000;
    // Graceful: ACPI power button; the guest's init stops the agent, syncs and powers off.
    try {
      const q = await Qmp.connect(vmFiles(this.runDir(id)).qmpSocket);
      try {
        await q.execute('system_powerdown');
      } finally {
        q.close();
      }
    } catch {
      /* QMP gone: fall through to force */
    }
    if (!(await this.waitExit(id, timeout))) {
      const pid = this.pid(id);
      if (pid !== null) process.kill(pid, 'SIGKILL');
      await this.waitExit(id, 5000);
    }
    await this.reapTap(id);
  }

  async status(id: string): Promise<SubstrateStatus> {
    assertMachineId(id);
    if (!this.records.has(id)) return 'absent';
    const rec = this.record(id);
    if (!this.disks.hasDisk(rec.disk)) return 'lost';
    if (this.pid(id) !== null) return 'running';
    await this.reapTap(id);
    return rec.desired === 'running' ? 'lost' : 'stopped';
  }

  /**
   * For the substrate watch: QEMU removes its pid file when it exits normally (a guest power-off, with
   * -no-reboot also a guest reboot), and cannot when it is killed; so a pid file naming a dead process is a
   * crash, a missing one a clean exit.
   */
  async liveness(id: string): Promise<Liveness> {
    assertMachineId(id);
    if (!this.records.has(id)) return 'absent';
    if (this.pid(id) !== null) return 'running';
    if (this.starting.has(id)) return 'running';
    return fs.existsSync(vmFiles(this.runDir(id)).pidFile) ? 'crashed' : 'shutdown';
  }

  async capture(id: string, holder: string): Promise<CaptureResult> {
    const rec = this.record(id);
    if (this.pid(id) === null) return this.machineDisks.freezeStopped(rec.disk, holder);
    // Live and crash-consistent: QEMU creates the new writable qcow2 on top of the current one and switches
    // to it; the old file (same path, now read-only to QEMU) becomes the layer.
    this.settleCapture(rec);
    const q = await Qmp.connect(vmFiles(this.runDir(id)).qmpSocket);
    try {
      const newNode = `disk${rec.captures + 1}`;
      const layer = await this.disks.freeze(rec.disk, holder, async (newPath) => {
        rec.pending = { node: newNode, blob: newPath };
        this.writeRecord(rec);
        await q.execute('blockdev-snapshot-sync', {
          'node-name': rec.diskNode,
          'snapshot-file': newPath,
          'snapshot-node-name': newNode,
          format: 'qcow2',
          mode: 'absolute-paths',
        });
      });
      rec.diskNode = newNode;
      rec.captures++;
      delete rec.pending;
      this.writeRecord(rec);
      return captured(layer, true);
    } finally {
      q.close();
    }
  }

  /**
   * A live capture a killed control plane left: the layer store adopted the new file as the disk's writable
   * blob when it existed (QEMU switched to it), so the running QEMU's active node is the pending one; else the
   * old node is still active.
   */
  private settleCapture(rec: VmRecord): void {
    if (!rec.pending) return;
    if (this.disks.blobPath(this.disks.disk(rec.disk).writable) === rec.pending.blob) {
      rec.diskNode = rec.pending.node;
      rec.captures++;
    }
    delete rec.pending;
    this.writeRecord(rec);
  }

  pinLayer: Layers['pinLayer'] = (layerId, holder) => this.machineDisks.pinLayer(layerId, holder);
  releaseLayer: Layers['releaseLayer'] = (layerId, holder) => this.machineDisks.releaseLayer(layerId, holder);
  layerPins: Layers['layerPins'] = () => this.machineDisks.layerPins();

  async replaceDisk(id: string, source: DiskSource): Promise<void> {
    const rec = this.record(id);
    if (this.pid(id) !== null) throw ERRORS.stopBeforeReplacingDisk();
    await this.machineDisks.replace(rec.disk, source);
  }

  async destroy(id: string): Promise<void> {
    assertMachineId(id);
    let rec: VmRecord | null = null;
    try {
      rec = this.record(id);
    } catch {
      /* partially created */
    }
    const pid = this.pid(id);
    if (pid !== null) {
      process.kill(pid, 'SIGKILL');
      await this.waitExit(id, 5000);
    }
    await this.reapTap(id);
    // A create killed between making the disk and writing the record leaves a disk no record names.
    await this.machineDisks.delete(id, rec?.disk);
    // The machine's address is free again once its record is gone.
    fs.rmSync(this.runDir(id), { recursive: true, force: true });
  }

  openChannel(id: string): Promise<Duplex> {
    this.record(id);
    return openUnixChannel(this.channelPath(id));
  }

  /** No secret: only the host holds the virtio-serial port's other end, so the channel is the proof. */
  async issueEnrollment(id: string): Promise<string | null> {
    this.record(id);
    return null;
  }

  /** QEMU's disks are files in the root: no shared volume, and a capture never freezes the machine. */
  thaw = (_id: string): Promise<void> => Promise.reject(cannotThaw());
  /**
   * A booted VM keeps the identity it booted with (its guest writes it at boot): a warm VM member is never handed
   * out (the create boots cold, with its own).
   */
  reidentify = (_id: string): Promise<void> => Promise.reject(cannotReidentify());
  diskVolume = (): DiskVolume | null => null;
  remountDiskVolume = (): Promise<void> => Promise.reject(noDiskVolume());

  async diskUsage(id: string): Promise<DiskUsage> {
    return this.machineDisks.usage(this.record(id).disk);
  }

  async reattach(): Promise<Array<{ id: string; status: SubstrateStatus }>> {
    const out: Array<{ id: string; status: SubstrateStatus }> = [];
    for (const id of this.records.ids()) {
      out.push({ id, status: await this.status(id) });
    }
    return out;
  }
}
