/**
 * The disk layer store: immutable layers plus one writable layer per disk. A layer's references are its child
 * layers, the disks standing on it and its pins (snapshots, templates); a layer with none is garbage and is
 * deleted. The bottom of every chain is a base image, which this store never deletes.
 *
 * Blobs (layer or writable) are named by id under <root>/blobs; how a blob is made and chained is the
 * backend's business (overlayfs directories for containers, qcow2 files for VMs). A capture turns the
 * writable blob into a layer in place (same path, so a running QEMU keeps its open file) and gives the disk
 * a new writable blob on top.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ERRORS } from '../../errors.js';

/**
 * Chains stay bounded (overlayfs mount options must fit a page; qcow2 reads walk the chain): a disk stands on
 * at most this many layers. A capture that would make a deeper layer makes a flattened one instead.
 */
export const MAX_CHAIN_DEPTH = 24;

export interface LayerRecord {
  id: string;
  /** Parent layer id, or null when the layer sits directly on `base`. */
  parent: string | null;
  base: string;
  bytes: number;
  created_at: string;
  pins: string[];
}

export interface DiskRecord {
  id: string;
  /** The top immutable layer under the writable one, or null (straight on the base). */
  top: string | null;
  base: string;
  writable: string;
  size_bytes: number;
}

interface State {
  version: 1;
  layers: Record<string, LayerRecord>;
  disks: Record<string, DiskRecord>;
  /** Live freezes begun and not yet recorded (written before QEMU switches files; see adoptLiveFreezes). */
  intents?: LiveFreezeIntent[];
}

/** A live capture in flight: a running QEMU is being switched from `frozen` to the new writable blob `next`. */
interface LiveFreezeIntent {
  disk: string;
  frozen: string;
  next: string;
  holder: string;
}

export interface BlobBackend {
  /** Create an empty writable blob over `lower` (paths of the chain, top first, ending with the base). */
  createWritable(blobPath: string, lower: string[], sizeBytes: number): Promise<void>;
  /** Make a just-frozen blob immutable (e.g. drop overlayfs's workdir). */
  sealLayer(blobPath: string): Promise<void>;
  deleteBlob(blobPath: string): Promise<void>;
  blobBytes(blobPath: string): Promise<number>;
  /** Duplicate a writable blob that stays in use (a live container's upper) into a new layer blob. */
  copyBlob?(srcBlobPath: string, dstBlobPath: string): Promise<void>;
  /** Write one blob with the content of `layers` (blob paths, top first) that sits directly on `base`. */
  flatten(dstBlobPath: string, layers: string[], base: string): Promise<void>;
  /** The path a chain element resolves to, for a blob's directory or file. */
  readonly blobSuffix: string;
}

function newId(prefix: string): string {
  return `${prefix}_${crypto.randomBytes(8).toString('hex')}`;
}

export class LayerStore {
  private state: State;
  private readonly statePath: string;
  private queue: Promise<unknown> = Promise.resolve();
  readonly maxDepth: number;

  constructor(
    readonly root: string,
    private readonly backend: BlobBackend,
    opts: { maxDepth?: number } = {},
  ) {
    this.maxDepth = opts.maxDepth ?? MAX_CHAIN_DEPTH;
    fs.mkdirSync(path.join(root, 'blobs'), { recursive: true, mode: 0o700 });
    this.statePath = path.join(root, 'state.json');
    this.state = fs.existsSync(this.statePath)
      ? (JSON.parse(fs.readFileSync(this.statePath, 'utf8')) as State)
      : { version: 1, layers: {}, disks: {} };
    // Queued before any mutation of this process, so nothing in flight can be mistaken for an orphan.
    void this.serial(async () => {
      await this.adoptLiveFreezes();
      return this.sweepOrphans();
    }).catch(() => {});
  }

  /**
   * Live freezes a killed process left half done. The intent is saved before QEMU is told to switch to the
   * new writable file; once the file exists QEMU may be writing the guest's data into it (and the frozen file
   * is its backing), so it is adopted, never swept: the frozen blob becomes the layer pinned by the holder
   * (the snapshot reconciler then finds the pin and settles the snapshot), the new blob the disk's writable.
   * A new blob that was never made means QEMU never switched: the intent is dropped and the disk is as it was.
   */
  private async adoptLiveFreezes(): Promise<void> {
    const intents = this.state.intents ?? [];
    if (!intents.length) return;
    for (const i of intents) {
      const d = this.state.disks[i.disk];
      if (!d || d.writable !== i.frozen || !fs.existsSync(this.blobPath(i.next))) continue;
      await this.backend.sealLayer(this.blobPath(i.frozen));
      const bytes = await this.backend.blobBytes(this.blobPath(i.frozen));
      this.state.layers[i.frozen] = { id: i.frozen, parent: d.top, base: d.base, bytes, created_at: new Date().toISOString(), pins: [i.holder] };
      d.top = i.frozen;
      d.writable = i.next;
    }
    delete this.state.intents;
    this.save();
  }

  private dropIntent(next: string): void {
    this.state.intents = (this.state.intents ?? []).filter((i) => i.next !== next);
    if (!this.state.intents.length) delete this.state.intents;
  }

  /**
   * Blobs no record names: what a process killed mid-capture (or mid-create) left behind, since the state file
   * is written only once a blob is complete. Deleted at open, so a crash leaks no layer.
   */
  private async sweepOrphans(): Promise<string[]> {
    const named = new Set<string>([...Object.keys(this.state.layers), ...Object.values(this.state.disks).map((d) => d.writable)]);
    const out: string[] = [];
    for (const f of fs.readdirSync(path.join(this.root, 'blobs'))) {
      if (!f.endsWith(this.backend.blobSuffix)) continue;
      const id = f.slice(0, f.length - this.backend.blobSuffix.length);
      if (!/^blb_[0-9a-f]+$/.test(id) || named.has(id)) continue;
      await this.backend.deleteBlob(this.blobPath(id));
      out.push(id);
    }
    return out;
  }

  /**
   * After the store's filesystem was mounted again (it had been forced read-only): what this process holds is
   * the truth, so the state file is written again, and blobs nothing names (a deletion the filesystem never
   * committed) are collected.
   */
  resync(): Promise<string[]> {
    return this.serial(async () => {
      this.save();
      return this.sweepOrphans();
    });
  }

  /** Waits for the mutations queued so far (tests: the orphan sweep at open). */
  settled(): Promise<void> {
    return this.serial(async () => {});
  }

  /** Mutations run one at a time; the state file is replaced atomically after each. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.queue.then(fn, fn);
    this.queue = p.catch(() => {});
    return p;
  }

  private save(): void {
    const tmp = `${this.statePath}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(this.state, null, 1), { mode: 0o600 });
    fs.renameSync(tmp, this.statePath);
  }

  blobPath(id: string): string {
    return path.join(this.root, 'blobs', id + this.backend.blobSuffix);
  }

  layer(id: string): LayerRecord {
    const l = this.state.layers[id];
    if (!l) throw ERRORS.layerNotFound();
    return l;
  }

  hasLayer(id: string): boolean {
    return id in this.state.layers;
  }

  disk(id: string): DiskRecord {
    const d = this.state.disks[id];
    if (!d) throw ERRORS.diskNotFound();
    return d;
  }

  hasDisk(id: string): boolean {
    return id in this.state.disks;
  }

  layers(): LayerRecord[] {
    return Object.values(this.state.layers);
  }

  disks(): DiskRecord[] {
    return Object.values(this.state.disks);
  }

  /** Layer ids from `top` down to the base, top first. */
  layerChain(top: string | null): string[] {
    const out: string[] = [];
    for (let cur = top; cur !== null; cur = this.layer(cur).parent) out.push(cur);
    return out;
  }

  /** Paths under a disk's writable blob: its layers top first, then the base. */
  lowerPaths(disk: DiskRecord): string[] {
    return [...this.layerChain(disk.top).map((l) => this.blobPath(l)), disk.base];
  }

  /** References to a layer: child layers + disks on it + pins. */
  refCount(layerId: string): number {
    const l = this.layer(layerId);
    let n = l.pins.length;
    for (const c of Object.values(this.state.layers)) if (c.parent === layerId) n++;
    for (const d of Object.values(this.state.disks)) if (d.top === layerId) n++;
    return n;
  }

  /** Whether a new layer on `top` would be deeper than the limit (and so must be flattened). */
  private tooDeep(top: string | null): boolean {
    return this.layerChain(top).length + 1 > this.maxDepth;
  }

  /**
   * A new sealed layer blob with the content of `topBlob` over the chain under `top`, sitting directly on the
   * base. Not registered: the caller records it.
   */
  private async flattened(topBlob: string, top: string | null, base: string): Promise<string> {
    const id = newId('blb');
    const dst = this.blobPath(id);
    try {
      await this.backend.flatten(dst, [topBlob, ...this.layerChain(top).map((l) => this.blobPath(l))], base);
      await this.backend.sealLayer(dst);
    } catch (e) {
      await this.backend.deleteBlob(dst).catch(() => {});
      throw e;
    }
    return id;
  }

  /** A new disk on the base image (`top` null) or on a layer, with an empty writable blob. */
  newDisk(opts: { id?: string; base: string; top: string | null; sizeBytes: number }): Promise<DiskRecord> {
    return this.serial(async () => {
      const base = opts.top === null ? opts.base : this.layer(opts.top).base;
      const id = opts.id ?? newId('dsk');
      if (this.state.disks[id]) throw ERRORS.diskExists();
      const writable = newId('blb');
      const rec: DiskRecord = { id, top: opts.top, base, writable, size_bytes: opts.sizeBytes };
      await this.backend.createWritable(this.blobPath(writable), this.lowerPaths(rec), opts.sizeBytes);
      this.state.disks[id] = rec;
      this.save();
      return { ...rec };
    });
  }

  /**
   * Freeze a disk's writable blob into a layer pinned by `holder`, and give the disk a new writable blob.
   * `makeWritable` creates the new writable blob (a live QEMU does it with blockdev-snapshot-sync); by
   * default the backend creates it (machine stopped).
   */
  freeze(
    diskId: string,
    holder: string,
    makeWritable?: (newBlobPath: string, frozenBlobPath: string) => Promise<void>,
  ): Promise<LayerRecord> {
    return this.serial(async () => {
      const d = this.disk(diskId);
      const flatten = this.tooDeep(d.top);
      // A running QEMU keeps reading the frozen file as the backing of its new writable one: its chain can
      // only be shortened while it is stopped (compactDisk at its next start).
      if (flatten && makeWritable)
        throw ERRORS.runningDiskAtLayerLimit(this.maxDepth);
      const frozen = d.writable;
      const next = newId('blb');
      const nextPath = this.blobPath(next);
      if (flatten) {
        await this.backend.sealLayer(this.blobPath(frozen));
        const flat = await this.flattened(this.blobPath(frozen), d.top, d.base);
        const layer: LayerRecord = { id: flat, parent: null, base: d.base, bytes: 0, created_at: new Date().toISOString(), pins: [holder] };
        await this.backend.createWritable(nextPath, [this.blobPath(flat), d.base], d.size_bytes);
        layer.bytes = await this.backend.blobBytes(this.blobPath(flat));
        this.state.layers[flat] = layer;
        d.top = flat;
        d.writable = next;
        this.save();
        await this.backend.deleteBlob(this.blobPath(frozen));
        await this.collect();
        return { ...layer, pins: [...layer.pins] };
      }
      const layer: LayerRecord = { id: frozen, parent: d.top, base: d.base, bytes: 0, created_at: new Date().toISOString(), pins: [holder] };
      if (makeWritable) {
        // Intent first: inside makeWritable a running QEMU starts writing the guest's data into `next`.
        this.state.intents = [...(this.state.intents ?? []), { disk: diskId, frozen, next, holder }];
        this.save();
        try {
          await makeWritable(nextPath, this.blobPath(frozen));
        } catch (e) {
          this.dropIntent(next);
          this.save();
          throw e;
        }
      } else await this.backend.createWritable(nextPath, [this.blobPath(frozen), ...this.lowerPaths(d)], d.size_bytes);
      await this.backend.sealLayer(this.blobPath(frozen));
      layer.bytes = await this.backend.blobBytes(this.blobPath(frozen));
      this.state.layers[frozen] = layer;
      d.top = frozen;
      d.writable = next;
      this.dropIntent(next);
      this.save();
      return { ...layer, pins: [...layer.pins] };
    });
  }

  /**
   * Shorten a stopped disk's chain when it has at least `minDepth` layers: its writable blob and every layer
   * under it become one flattened layer, with a new empty writable blob on top. Layers that snapshots pin
   * stay; the rest are freed. Returns whether it compacted.
   */
  compactDisk(diskId: string, minDepth: number): Promise<boolean> {
    return this.serial(async () => {
      const d = this.disk(diskId);
      if (this.layerChain(d.top).length < minDepth) return false;
      const old = d.writable;
      await this.backend.sealLayer(this.blobPath(old));
      const flat = await this.flattened(this.blobPath(old), d.top, d.base);
      const next = newId('blb');
      await this.backend.createWritable(this.blobPath(next), [this.blobPath(flat), d.base], d.size_bytes);
      this.state.layers[flat] = {
        id: flat,
        parent: null,
        base: d.base,
        bytes: await this.backend.blobBytes(this.blobPath(flat)),
        created_at: new Date().toISOString(),
        pins: [],
      };
      d.top = flat;
      d.writable = next;
      this.save();
      await this.backend.deleteBlob(this.blobPath(old));
      await this.collect();
      return true;
    });
  }

  /**
   * A layer made by copying a disk's writable blob while the disk stays in use (overlayfs cannot swap the
   * upper directory of a mounted overlay). The disk keeps its chain; the copy sits on the same parent.
   */
  copyToLayer(diskId: string, holder: string, copy?: (srcBlobPath: string, dstBlobPath: string) => Promise<void>): Promise<LayerRecord> {
    return this.serial(async () => {
      const d = this.disk(diskId);
      const doCopy = copy ?? this.backend.copyBlob?.bind(this.backend);
      if (!doCopy) throw ERRORS.cannotCopyWritableBlob();
      let id = newId('blb');
      const dst = this.blobPath(id);
      try {
        await doCopy(this.blobPath(d.writable), dst);
        await this.backend.sealLayer(dst);
      } catch (e) {
        await this.backend.deleteBlob(dst).catch(() => {});
        throw e;
      }
      let parent = d.top;
      if (this.tooDeep(d.top)) {
        try {
          id = await this.flattened(dst, d.top, d.base);
        } finally {
          await this.backend.deleteBlob(dst);
        }
        parent = null;
      }
      const layer: LayerRecord = {
        id,
        parent,
        base: d.base,
        bytes: await this.backend.blobBytes(this.blobPath(id)),
        created_at: new Date().toISOString(),
        pins: [holder],
      };
      this.state.layers[id] = layer;
      this.save();
      return layer;
    });
  }

  /**
   * Register layers whose blobs were placed at their paths from outside (a transfer from another host), oldest
   * first, in one state write: either all are named or none (a crash before the write leaves blobs the next
   * open sweeps). Each parent must be registered already or come earlier in the list; a layer registered
   * meanwhile is kept as it is. `holder` pins the last one. Returns the ids newly registered.
   */
  adoptLayers(records: ReadonlyArray<Pick<LayerRecord, 'id' | 'parent' | 'created_at'>>, base: string, holder: string): Promise<string[]> {
    return this.serial(async () => {
      const fresh: LayerRecord[] = [];
      const known = (id: string) => this.hasLayer(id) || fresh.some((l) => l.id === id);
      for (const r of records) {
        if (this.hasLayer(r.id)) continue;
        if (r.parent !== null && !known(r.parent)) throw ERRORS.layerNotFound();
        fresh.push({ id: r.id, parent: r.parent, base, bytes: await this.backend.blobBytes(this.blobPath(r.id)), created_at: r.created_at, pins: [] });
      }
      const top = records[records.length - 1];
      for (const l of fresh) this.state.layers[l.id] = l;
      if (top) {
        const l = this.layer(top.id);
        if (!l.pins.includes(holder)) l.pins.push(holder);
      }
      this.save();
      return fresh.map((l) => l.id);
    });
  }

  pin(layerId: string, holder: string): Promise<void> {
    return this.serial(async () => {
      const l = this.layer(layerId);
      if (!l.pins.includes(holder)) l.pins.push(holder);
      this.save();
    });
  }

  /** Every (layer, holder) pin, for reconciling pins against the control plane's records. */
  pins(): Array<{ layerId: string; holder: string; bytes: number }> {
    return Object.values(this.state.layers).flatMap((l) => l.pins.map((holder) => ({ layerId: l.id, holder, bytes: l.bytes })));
  }

  /** Drop a pin; layers left without references are deleted. Returns the freed layer ids. */
  unpin(layerId: string, holder: string): Promise<string[]> {
    return this.serial(async () => {
      // Already gone (a release retried after a crash): nothing to drop.
      if (!this.hasLayer(layerId)) return [];
      const l = this.layer(layerId);
      l.pins = l.pins.filter((h) => h !== holder);
      this.save();
      return this.collect();
    });
  }

  /** Point a disk at a new chain (restore): its writable blob is replaced by an empty one on `top`. */
  replaceDisk(diskId: string, top: string | null, base: string): Promise<DiskRecord> {
    return this.serial(async () => {
      const d = this.disk(diskId);
      const old = d.writable;
      const rec: DiskRecord = { ...d, top, base: top === null ? base : this.layer(top).base, writable: newId('blb') };
      await this.backend.createWritable(this.blobPath(rec.writable), this.lowerPaths(rec), d.size_bytes);
      this.state.disks[diskId] = rec;
      this.save();
      await this.backend.deleteBlob(this.blobPath(old));
      await this.collect();
      return { ...rec };
    });
  }

  /** Delete a disk and its writable blob; returns the layers that became garbage and were freed. */
  deleteDisk(diskId: string): Promise<string[]> {
    return this.serial(async () => {
      const d = this.state.disks[diskId];
      if (!d) return [];
      delete this.state.disks[diskId];
      this.save();
      await this.backend.deleteBlob(this.blobPath(d.writable));
      return this.collect();
    });
  }

  /** Garbage collection: delete layers with no references, repeatedly (a freed child frees its parent). */
  gc(): Promise<string[]> {
    return this.serial(() => this.collect());
  }

  private async collect(): Promise<string[]> {
    const freed: string[] = [];
    for (;;) {
      const garbage = Object.keys(this.state.layers).filter((id) => this.refCount(id) === 0);
      if (!garbage.length) break;
      for (const id of garbage) {
        delete this.state.layers[id];
        freed.push(id);
      }
      this.save();
      for (const id of garbage) await this.backend.deleteBlob(this.blobPath(id));
    }
    return freed;
  }

  /** One disk's metering figures: provisioned size, bytes in its writable blob, its layers top first. */
  async diskUsage(diskId: string): Promise<{ provisioned_bytes: number; writable_bytes: number; chain: string[] }> {
    const d = this.disk(diskId);
    return { provisioned_bytes: d.size_bytes, writable_bytes: await this.backend.blobBytes(this.blobPath(d.writable)), chain: this.layerChain(d.top) };
  }

  /** Bytes held per layer and per disk, for metering (cold storage: pinned layers; hot: provisioned disks). */
  async usage(): Promise<{
    layers: Array<{ id: string; bytes: number; pins: string[]; refs: number }>;
    disks: Array<{ id: string; provisioned_bytes: number; writable_bytes: number }>;
  }> {
    const disks = [];
    for (const d of Object.values(this.state.disks))
      disks.push({ id: d.id, provisioned_bytes: d.size_bytes, writable_bytes: await this.backend.blobBytes(this.blobPath(d.writable)) });
    return {
      layers: Object.values(this.state.layers).map((l) => ({ id: l.id, bytes: l.bytes, pins: [...l.pins], refs: this.refCount(l.id) })),
      disks,
    };
  }
}

/** Allocated bytes under a path (files, directories), like `du -s --block-size=1`. */
export function allocatedBytes(p: string): number {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(p);
  } catch {
    return 0;
  }
  let n = st.blocks * 512;
  if (st.isDirectory()) for (const name of fs.readdirSync(p)) n += allocatedBytes(path.join(p, name));
  return n;
}
