/**
 * btrfs for container disk layers. A live container's overlay upper directory cannot be swapped while it is
 * mounted, so a live capture has to duplicate it; on btrfs each upper directory is a subvolume and the
 * duplicate is a read-only snapshot: metadata only, a few milliseconds whatever was written. Hosts whose data
 * directory is not on btrfs get a sparse, loop-mounted btrfs volume file instead (see `ensureBtrfsVolume`).
 */
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { runTethered } from './tethered.js';

const run = promisify(execFile);

const BTRFS_SUPER_MAGIC = 0x9123683e;
/** The root directory of every btrfs subvolume has this inode number. */
const SUBVOLUME_ROOT_INO = 256;

export function isBtrfs(dir: string): boolean {
  try {
    return fs.statfsSync(dir).type === BTRFS_SUPER_MAGIC;
  } catch {
    return false;
  }
}

export function isSubvolume(p: string): boolean {
  try {
    const st = fs.lstatSync(p);
    return st.isDirectory() && st.ino === SUBVOLUME_ROOT_INO && isBtrfs(p);
  } catch {
    return false;
  }
}

function hasCommand(cmd: string): boolean {
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':').concat(['/usr/sbin', '/sbin'])) {
    try {
      fs.accessSync(path.join(dir, cmd), fs.constants.X_OK);
      return true;
    } catch {
      /* next */
    }
  }
  return false;
}

/** Whether a path is a mount point (by /proc/self/mountinfo). */
export function isMounted(target: string): boolean {
  const abs = path.resolve(target);
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .some((l) => l.split(' ')[4] === abs);
}

/**
 * Whether `dir` is on a read-only filesystem: access(2) answers EROFS for a read-only mount and for a
 * filesystem the kernel forced read-only (btrfs after it aborted a transaction, e.g. because its loop volume's
 * backing filesystem filled; the mount's own options still say `rw` then). No write is made to find out.
 */
export function readOnlyFs(dir: string): boolean {
  try {
    fs.accessSync(dir, fs.constants.W_OK);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EROFS';
  }
}

/** `mount` argv for the loop volume (pure; pinned by a test). */
export function loopMountArgs(image: string, dir: string): string[] {
  return ['-o', 'loop,discard=async,noatime', image, dir];
}

/**
 * Mount the loop volume `image` on `dir` again: btrfs refuses `remount,rw` after it aborted a transaction, so
 * the only way back is a new mount (which reads the last committed state and replays fsync'd writes from its
 * log). Plain `umount`, never lazy: a lazily detached old mount would keep its loop device and filesystem
 * alive, and a second mount of the same file beside it could corrupt it. EBUSY (something still uses the
 * volume) is thrown to the caller, who retries.
 */
export async function remountLoopVolume(opts: { dir: string; image: string }): Promise<void> {
  if (isMounted(opts.dir)) await run('umount', [opts.dir]);
  await run('mount', loopMountArgs(opts.image, opts.dir));
  if (!isBtrfs(opts.dir) || readOnlyFs(opts.dir)) throw new Error('the btrfs volume did not mount read-write');
}

export type VolumeOutcome =
  /** `quotas`: qgroups are on, so each writable blob can be limited to its disk's size (limitSubvolume). */
  | { kind: 'btrfs'; how: 'native' | 'loop'; quotas: boolean }
  | { kind: 'plain'; reason: string };

/** Host space a new loop volume leaves free: a tenth of the host filesystem, at least 2 GiB. */
export function volumeReserve(hostBytes: number): number {
  return Math.max(2 * 1024 ** 3, Math.floor(hostBytes / 10));
}

/**
 * Default apparent size of a new loop volume: the host filesystem's free space minus the reserve, so machines
 * filling their disks fill the volume before they fill the host filesystem (which also holds the database).
 */
export function defaultVolumeBytes(st: { blocks: number; bavail: number; bsize: number }): number {
  return Math.max(1024 ** 3, st.bavail * st.bsize - volumeReserve(st.blocks * st.bsize));
}

/** Turn btrfs quotas (qgroups) on for the filesystem holding `dir`; idempotent. False when it cannot. */
function enableQuotas(dir: string): boolean {
  try {
    execFileSync('btrfs', ['quota', 'enable', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Limit what a subvolume references (its files, shared with snapshots or not) to `bytes`: writes beyond it
 * fail with EDQUOT in the guest. Snapshots of it are qgroups of their own and do not count.
 */
export async function limitSubvolume(p: string, bytes: number): Promise<void> {
  await runTethered('btrfs', ['qgroup', 'limit', String(bytes), p]);
}

/**
 * Make `dir` a btrfs directory if it can be: already on btrfs (native), or a sparse volume file `image`
 * (created at `sizeBytes` apparent size; it takes host space only as data is written, and `discard` gives
 * deleted blocks back) loop-mounted on `dir`. Synchronous: it runs once when a substrate is constructed,
 * before its layer store reads its state from `dir`. An existing non-btrfs `dir` that already holds data
 * stays as it is (plain), so an upgrade never hides a host's disks behind a new mount.
 */
export function ensureBtrfsVolume(opts: { dir: string; image: string; sizeBytes: number }): VolumeOutcome {
  const { dir, image } = opts;
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (isBtrfs(dir)) return { kind: 'btrfs', how: isMounted(dir) && fs.existsSync(image) ? 'loop' : 'native', quotas: enableQuotas(dir) };
  if (!fs.existsSync(image) && fs.readdirSync(dir).length > 0) return { kind: 'plain', reason: 'the disks directory already holds data outside btrfs' };
  if (!hasCommand('mkfs.btrfs') || !hasCommand('btrfs')) return { kind: 'plain', reason: 'btrfs-progs is not installed' };
  try {
    if (!fs.existsSync(image)) {
      const tmp = `${image}.tmp`;
      const fd = fs.openSync(tmp, 'w', 0o600);
      try {
        fs.ftruncateSync(fd, opts.sizeBytes);
      } finally {
        fs.closeSync(fd);
      }
      execFileSync('mkfs.btrfs', ['-q', tmp], { stdio: 'ignore' });
      fs.renameSync(tmp, image);
    }
    execFileSync('mount', loopMountArgs(image, dir), { stdio: 'ignore' });
  } catch (e) {
    return { kind: 'plain', reason: `could not mount a btrfs volume (${(e as Error).message.split('\n')[0]})` };
  }
  return isBtrfs(dir) ? { kind: 'btrfs', how: 'loop', quotas: enableQuotas(dir) } : { kind: 'plain', reason: 'the btrfs volume did not mount' };
}

export async function createSubvolume(p: string): Promise<void> {
  await runTethered('btrfs', ['-q', 'subvolume', 'create', p]);
}

/** A writable snapshot (btrfs flushes the subvolume's dirty data into it first); `dst` must not exist. */
export async function snapshot(src: string, dst: string): Promise<void> {
  await runTethered('btrfs', ['-q', 'subvolume', 'snapshot', src, dst]);
}

export async function setReadOnly(p: string): Promise<void> {
  await runTethered('btrfs', ['property', 'set', '-ts', p, 'ro', 'true']);
}

export async function deleteSubvolume(p: string): Promise<void> {
  await runTethered('btrfs', ['-q', 'subvolume', 'delete', p]);
}

/** A subvolume's place among snapshots: its own UUID, the one it was snapshotted from, the one it was received as. */
export interface SubvolumeIdentity {
  uuid: string;
  /** null: not a snapshot. */
  parentUuid: string | null;
  /** null: not received (made on this filesystem). */
  receivedUuid: string | null;
  generation: number;
}

/** `btrfs subvolume show` output as a SubvolumeIdentity (pure; pinned by a test). */
export function parseSubvolumeShow(out: string): SubvolumeIdentity {
  const field = (name: string): string | null => {
    const m = new RegExp(`^\\s*${name}:\\s*(\\S+)\\s*$`, 'm').exec(out);
    return m && m[1] !== '-' ? m[1]! : null;
  };
  const uuid = field('UUID');
  if (!uuid) throw new Error('btrfs subvolume show printed no UUID');
  return { uuid, parentUuid: field('Parent UUID'), receivedUuid: field('Received UUID'), generation: Number(field('Generation') ?? 0) };
}

export async function subvolumeIdentity(p: string): Promise<SubvolumeIdentity> {
  const { stdout } = await run('btrfs', ['subvolume', 'show', p]);
  return parseSubvolumeShow(stdout);
}
