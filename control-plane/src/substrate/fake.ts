/**
 * An in-memory substrate for unit tests of control-plane logic: no processes, no disks. Delays and failures
 * are injectable per operation; the channel is an in-process duplex an optional handler serves.
 */
import { Duplex } from 'node:stream';
import {
  assertMachineId,
  cannotThaw,
  noDiskVolume,
  notFound,
  type CaptureResult,
  type CreateSpec,
  type DiskSource,
  type DiskUsage,
  type DiskVolume,
  type LayerPin,
  type MachineResources,
  type Substrate,
  type Liveness,
  type SubstrateStatus,
} from './substrate.js';
import { newIdentity, type MachineIdentity } from './identity.js';
import { ERRORS } from '../errors.js';

export type FakeOp = 'create' | 'start' | 'stop' | 'status' | 'capture' | 'replaceDisk' | 'destroy' | 'openChannel' | 'releaseLayer' | 'liveness';

export interface FakeMachine {
  id: string;
  resources: MachineResources;
  source: DiskSource;
  network: 'none' | 'outbound';
  state: 'running' | 'stopped' | 'lost';
  /** Pretend disk content: a capture copies it into a layer, a fork or restore starts from a layer's copy. */
  files: Map<string, string>;
  starts: number;
  /** Its guest identity as the real drivers write it (identity.ts). */
  identity: MachineIdentity;
  /** How it last ended on its own (exitFromOutside); cleared by a start. */
  exit?: 'crashed' | 'shutdown';
}

export interface FakeSubstrateOptions {
  /** Milliseconds each operation waits before acting. */
  delays?: Partial<Record<FakeOp, number>>;
  /** Serves the machine's end of an opened channel (e.g. an agent app); without it the far end is inert. */
  channelHandler?: (machineId: string, guestEnd: Duplex) => void;
}

export class FakeSubstrate implements Substrate {
  readonly kind = 'fake' as const;
  readonly machines = new Map<string, FakeMachine>();
  readonly layers = new Map<string, { files: Map<string, string>; pins: Set<string> }>();
  /** Every call, in order, as `op:id` (for assertions on what the control plane asked for). */
  readonly calls: string[] = [];
  private readonly failures = new Map<FakeOp, Error[]>();
  private seq = 0;

  constructor(private readonly opts: FakeSubstrateOptions = {}) {}

  /** The next call of `op` throws `err` (queued; one failure per call). */
  failNext(op: FakeOp, err: Error = ERRORS.fakeFailure(op)): void {
    const q = this.failures.get(op) ?? [];
    q.push(err);
    this.failures.set(op, q);
  }

  private readonly holds = new Map<FakeOp, Promise<void>>();

  /**
   * Every call of `op` from now waits, once entered (and listed in `calls`), until the returned release is called:
   * a test sees the state the control plane recorded before the act, however long its queries take.
   */
  hold(op: FakeOp): () => void {
    let release!: () => void;
    this.holds.set(op, new Promise<void>((r) => (release = r)));
    return () => {
      this.holds.delete(op);
      release();
    };
  }

  setDelay(op: FakeOp, ms: number): void {
    this.opts.delays = { ...this.opts.delays, [op]: ms };
  }

  /** Simulate the host losing a machine (e.g. its process died while the control plane was down). */
  lose(id: string): void {
    const m = this.machines.get(id);
    if (m) m.state = 'lost';
  }

  private async enter(op: FakeOp, id: string): Promise<void> {
    this.calls.push(`${op}:${id}`);
    await this.holds.get(op);
    const d = this.opts.delays?.[op] ?? 0;
    if (d > 0) await new Promise((r) => setTimeout(r, d));
    const q = this.failures.get(op);
    const err = q?.shift();
    if (err) throw err;
  }

  private get(id: string): FakeMachine {
    const m = this.machines.get(id);
    if (!m) throw notFound();
    return m;
  }

  private filesOf(source: DiskSource): Map<string, string> {
    if (source.kind === 'base') return new Map();
    const l = this.layers.get(source.layerId);
    if (!l) throw ERRORS.layerNotFound();
    return new Map(l.files);
  }

  async create(spec: CreateSpec, opts: { start?: boolean } = {}): Promise<void> {
    assertMachineId(spec.id);
    await this.enter('create', spec.id);
    if (this.machines.has(spec.id)) throw ERRORS.machineExistsOnSubstrate();
    this.machines.set(spec.id, {
      id: spec.id,
      resources: { ...spec.resources },
      source: spec.source,
      network: spec.network ?? 'none',
      state: 'stopped',
      files: this.filesOf(spec.source),
      starts: 0,
      identity: newIdentity(),
    });
    if (opts.start !== false) await this.start(spec.id);
  }

  async start(id: string): Promise<void> {
    await this.enter('start', id);
    const m = this.get(id);
    if (m.state === 'lost') throw ERRORS.machineLost();
    m.state = 'running';
    m.starts++;
    delete m.exit;
  }

  async stop(id: string): Promise<void> {
    await this.enter('stop', id);
    const m = this.get(id);
    if (m.state === 'running') m.state = 'stopped';
  }

  async status(id: string): Promise<SubstrateStatus> {
    await this.enter('status', id);
    const m = this.machines.get(id);
    return m ? m.state : 'absent';
  }

  async liveness(id: string): Promise<Liveness> {
    await this.enter('liveness', id);
    const m = this.machines.get(id);
    if (!m) return 'absent';
    return m.state === 'running' ? 'running' : m.state === 'stopped' ? (m.exit ?? 'shutdown') : 'crashed';
  }

  /** The guest ends on its own (killed from outside: `crashed`; a clean power-off: `shutdown`). */
  exitFromOutside(id: string, how: 'crashed' | 'shutdown'): void {
    const m = this.get(id);
    m.state = 'stopped';
    m.exit = how;
  }

  async capture(id: string, holder: string): Promise<CaptureResult> {
    await this.enter('capture', id);
    const m = this.get(id);
    const layerId = `fake_layer_${++this.seq}`;
    this.layers.set(layerId, { files: new Map(m.files), pins: new Set([holder]) });
    let bytes = 0;
    for (const v of m.files.values()) bytes += Buffer.byteLength(v);
    return { layerId, bytes, live: m.state === 'running' };
  }

  async replaceDisk(id: string, source: DiskSource): Promise<void> {
    await this.enter('replaceDisk', id);
    const m = this.get(id);
    if (m.state === 'running') throw ERRORS.stopBeforeReplacingDisk();
    m.files = this.filesOf(source);
    m.source = source;
  }

  async destroy(id: string): Promise<void> {
    await this.enter('destroy', id);
    this.machines.delete(id);
  }

  unpin(layerId: string, holder: string): void {
    const l = this.layers.get(layerId);
    if (!l) return;
    l.pins.delete(holder);
    const inUse = [...this.machines.values()].some((m) => m.source.kind === 'layer' && m.source.layerId === layerId);
    if (l.pins.size === 0 && !inUse) this.layers.delete(layerId);
  }

  async pinLayer(layerId: string, holder: string): Promise<void> {
    const l = this.layers.get(layerId);
    if (!l) throw ERRORS.layerNotFound();
    l.pins.add(holder);
  }

  async releaseLayer(layerId: string, holder: string): Promise<void> {
    await this.enter('releaseLayer', layerId);
    this.unpin(layerId, holder);
  }

  async layerPins(): Promise<LayerPin[]> {
    const out: LayerPin[] = [];
    for (const [layerId, l] of this.layers) {
      let bytes = 0;
      for (const v of l.files.values()) bytes += Buffer.byteLength(v);
      for (const holder of l.pins) out.push({ layerId, holder, bytes });
    }
    return out;
  }

  async openChannel(id: string): Promise<Duplex> {
    await this.enter('openChannel', id);
    const m = this.get(id);
    if (m.state !== 'running') throw ERRORS.machineNotRunning();
    const [hostEnd, guestEnd] = duplexPair();
    this.opts.channelHandler?.(id, guestEnd);
    return hostEnd;
  }

  /** The in-memory channel is as private as a VM's virtio port: no secret, the channel is the proof. */
  async issueEnrollment(id: string): Promise<string | null> {
    this.get(id);
    return null;
  }

  /** It never freezes a machine (liveness never says `frozen`), and it has no shared disk volume. */
  thaw = (_id: string): Promise<void> => Promise.reject(cannotThaw());

  async reidentify(id: string): Promise<void> {
    const m = this.get(id);
    if (m.state !== 'running') throw ERRORS.machineLost();
    m.identity = newIdentity();
  }
  diskVolume = (): DiskVolume | null => null;
  remountDiskVolume = (): Promise<void> => Promise.reject(noDiskVolume());

  channelPath(id: string): string {
    return `fake://${id}`;
  }

  async diskUsage(id: string): Promise<DiskUsage> {
    const m = this.get(id);
    let bytes = 0;
    for (const v of m.files.values()) bytes += Buffer.byteLength(v);
    return { provisioned_bytes: m.resources.disk_gb * 1024 ** 3, writable_bytes: bytes, chain: m.source.kind === 'layer' ? [m.source.layerId] : [] };
  }

  async reattach(): Promise<Array<{ id: string; status: SubstrateStatus }>> {
    return [...this.machines.values()].map((m) => ({ id: m.id, status: m.state }));
  }
}

/** Two connected in-memory duplex streams (what one end writes, the other reads). */
export function duplexPair(): [Duplex, Duplex] {
  class End extends Duplex {
    other!: End;
    override _read(): void {}
    override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
      this.other.push(chunk);
      cb();
    }
    override _final(cb: (e?: Error | null) => void): void {
      this.other.push(null);
      cb();
    }
  }
  const a = new End();
  const b = new End();
  a.other = b;
  b.other = a;
  return [a, b];
}
