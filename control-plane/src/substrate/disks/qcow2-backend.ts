/**
 * Layer blobs as qcow2 files chained by backing file. The base is the image's base.qcow2. A writable blob's
 * virtual size is the machine's disk size (the guest grows its filesystem to fit at boot).
 */
import fs from 'node:fs';
import type { BlobBackend } from './layer-store.js';
import { runTethered } from './tethered.js';

export class Qcow2Backend implements BlobBackend {
  readonly blobSuffix = '.qcow2';

  async createWritable(blobPath: string, lower: string[], sizeBytes: number): Promise<void> {
    const backing = lower[0];
    if (!backing) throw new Error('a qcow2 disk needs a backing file');
    await runTethered('qemu-img', ['create', '-q', '-f', 'qcow2', '-b', backing, '-F', 'qcow2', blobPath, String(sizeBytes)]);
  }

  /**
   * The chain's content as one qcow2 on the base: a copy of the top layer rebased in qemu-img's safe mode,
   * which writes every cluster where the old chain (recorded in the files) differs from the base. (`convert
   * -B` would copy only the top file's own clusters.)
   */
  async flatten(dst: string, layers: string[], base: string): Promise<void> {
    const top = layers[0];
    if (!top) throw new Error('nothing to flatten');
    await runTethered('cp', ['--reflink=auto', top, dst]);
    fs.chmodSync(dst, 0o600);
    await runTethered('qemu-img', ['rebase', '-q', '-f', 'qcow2', '-b', base, '-F', 'qcow2', dst]);
  }

  async sealLayer(blobPath: string): Promise<void> {
    fs.chmodSync(blobPath, 0o400);
  }

  async deleteBlob(blobPath: string): Promise<void> {
    fs.rmSync(blobPath, { force: true });
  }

  async blobBytes(blobPath: string): Promise<number> {
    try {
      return fs.statSync(blobPath).blocks * 512;
    } catch {
      return 0;
    }
  }
}
