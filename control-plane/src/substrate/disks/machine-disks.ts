/**
 * A machine's disk over the layer store, the same for both drivers (vm/driver.ts over qcow2 blobs,
 * container/driver.ts over overlayfs directories): named after its machine, made from a create's source and
 * size on the driver's base image, restored onto a layer, frozen in place when the machine is stopped,
 * measured and deleted; and the Layers port's pin calls. What differs per driver (a live capture: QEMU's
 * snapshot switch, a frozen container's copy) stays in the driver, over the same layer store.
 */
import type { CaptureResult, CreateSpec, DiskSource, DiskUsage, LayerPin, Layers } from '../substrate.js';
import type { DiskRecord, LayerRecord, LayerStore } from './layer-store.js';

const GiB = 1024 ** 3;

/** The layer a disk stands on: a captured one, or none (the base image alone). */
function topOf(source: DiskSource): string | null {
  return source.kind === 'layer' ? source.layerId : null;
}

/** A capture's answer from the layer it made. */
export function captured(layer: LayerRecord, live: boolean): CaptureResult {
  return { layerId: layer.id, bytes: layer.bytes, live };
}

export class MachineDisks implements Pick<Layers, 'pinLayer' | 'releaseLayer' | 'layerPins'> {
  /** `base`: the driver's guest image (the bottom of every new chain). */
  constructor(
    readonly store: LayerStore,
    private readonly base: string,
  ) {}

  /** A machine's disk name (a create killed before its record was written leaves a disk only this names). */
  static nameFor(machineId: string): string {
    return `disk-${machineId}`;
  }

  make(spec: Pick<CreateSpec, 'id' | 'resources' | 'source'>): Promise<DiskRecord> {
    return this.store.newDisk({ id: MachineDisks.nameFor(spec.id), base: this.base, top: topOf(spec.source), sizeBytes: spec.resources.disk_gb * GiB });
  }

  /** Restore: the disk's writable blob is replaced by an empty one on `source` (the machine is stopped). */
  async replace(diskId: string, source: DiskSource): Promise<void> {
    await this.store.replaceDisk(diskId, topOf(source), this.base);
  }

  /** A stopped machine's capture: its writable blob becomes the layer in place. */
  async freezeStopped(diskId: string, holder: string): Promise<CaptureResult> {
    return captured(await this.store.freeze(diskId, holder), false);
  }

  /** The machine's disk, by its record's name, else by the name a create gives it; absent is not an error. */
  async delete(machineId: string, diskId: string | undefined): Promise<void> {
    await this.store.deleteDisk(diskId ?? MachineDisks.nameFor(machineId));
  }

  usage(diskId: string): Promise<DiskUsage> {
    return this.store.diskUsage(diskId);
  }

  async pinLayer(layerId: string, holder: string): Promise<void> {
    await this.store.pin(layerId, holder);
  }

  async releaseLayer(layerId: string, holder: string): Promise<void> {
    await this.store.unpin(layerId, holder);
  }

  async layerPins(): Promise<LayerPin[]> {
    return this.store.pins();
  }
}
