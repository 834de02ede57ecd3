/**
 * What a container substrate root holds besides its machines, made (or found) when the substrate object is
 * made: podman's private state and run directories with their containers.conf, the root's guest uid range
 * (idmap.ts), and the disk layer store with how its layers are duplicated (btrfs snapshots on the root's own
 * filesystem or a loop volume file, else copies).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { defaultVolumeBytes, ensureBtrfsVolume } from '../disks/btrfs.js';
import { LayerStore } from '../disks/layer-store.js';
import { OverlayBackend } from '../disks/overlay-backend.js';
import { uidBaseFor } from './idmap.js';
import { containersConf, networkConfigDir, type PodmanEnv } from './podman-argv.js';

/** podman's state under the root and its run directory (default /run/computer-podman/<hash of root>), made. */
export function preparePodman(root: string, runDir?: string): PodmanEnv {
  const run = runDir ?? path.join('/run/computer-podman', crypto.createHash('sha256').update(path.resolve(root)).digest('hex').slice(0, 12));
  const stateDir = path.join(root, 'podman');
  const env: PodmanEnv = { stateDir, runDir: run, storageDriver: fs.existsSync(path.join(stateDir, 'root', 'overlay')) ? 'overlay' : 'vfs' };
  fs.mkdirSync(path.join(env.stateDir, 'root'), { recursive: true, mode: 0o700 });
  for (const d of ['run', 'tmp']) fs.mkdirSync(path.join(run, d), { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(env.stateDir, 'containers.conf'), containersConf());
  fs.mkdirSync(networkConfigDir(env), { recursive: true, mode: 0o700 });
  return env;
}

/**
 * The root's uid range, recorded in `<root>/idmap.json` when the root is first used (from its network slot
 * `netIndex`). Null for a root that already held machines before ranges existed.
 */
export function guestRange(root: string, netIndex: number, hasMachines: boolean, warn?: (msg: string) => void): number | null {
  const f = path.join(root, 'idmap.json');
  try {
    return (JSON.parse(fs.readFileSync(f, 'utf8')) as { base: number }).base;
  } catch {
    /* not yet recorded */
  }
  if (hasMachines) {
    warn?.('container substrate: this root\'s machines predate private uid ranges; guest uids are host uids');
    return null;
  }
  const base = uidBaseFor(netIndex);
  fs.writeFileSync(f, JSON.stringify({ base }));
  return base;
}

export interface RootDisks {
  disks: LayerStore;
  /** How live captures duplicate the writable layer. */
  diskMode: 'snapshot' | 'copy';
  /** Where the disks' btrfs lives: the root's own filesystem, a loop volume file, or none (plain directory). */
  volume: 'native' | 'loop' | null;
}

/** The root's layer store (`<root>/disks`), on btrfs unless `disks` is `copy` or the host has none to give. */
export function rootDisks(o: { root: string; disks?: 'auto' | 'copy'; volumeBytes?: number; warn?: (msg: string) => void }): RootDisks {
  const disksDir = path.join(o.root, 'disks');
  let snapshots = false;
  let quotas = false;
  let volume: RootDisks['volume'] = null;
  if (o.disks !== 'copy') {
    const vol = ensureBtrfsVolume({ dir: disksDir, image: path.join(o.root, 'disks.btrfs'), sizeBytes: o.volumeBytes ?? defaultVolumeBytes(fs.statfsSync(o.root)) });
    snapshots = vol.kind === 'btrfs';
    volume = vol.kind === 'btrfs' ? vol.how : null;
    quotas = vol.kind === 'btrfs' && vol.quotas;
    if (vol.kind === 'plain') o.warn?.(`container substrate: live captures copy files and machines' disks are not limited (${vol.reason})`);
    else if (!quotas) o.warn?.('container substrate: btrfs quotas unavailable: machines\' disks are not limited to their size');
  }
  return { disks: new LayerStore(disksDir, new OverlayBackend({ snapshots, quotas })), diskMode: snapshots ? 'snapshot' : 'copy', volume };
}
