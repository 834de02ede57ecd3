/**
 * Layer blobs as overlayfs directories: <blob>/diff holds the files (with overlayfs whiteouts and opaque
 * xattrs), a writable blob also has <blob>/work. The base is a plain read-only root directory.
 *
 * With `snapshots` (the store's root is on btrfs) every blob is a subvolume (diff/ and work/ both inside it:
 * overlayfs renames from work/ into diff/, which cannot cross subvolumes): a live capture is a snapshot of the
 * writable blob (metadata only, constant time), a layer is read-only, and a flattened layer starts as a
 * snapshot of its oldest layer. Without it, live captures copy.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { createSubvolume, deleteSubvolume, isMounted, isSubvolume, limitSubvolume, setReadOnly, snapshot } from './btrfs.js';
import { allocatedBytes, type BlobBackend } from './layer-store.js';
import { runTethered } from './tethered.js';

const run = promisify(execFile);

export { isMounted };

export class OverlayBackend implements BlobBackend {
  readonly blobSuffix = '';

  /**
   * `quotas` (btrfs with qgroups on): each writable blob is limited to its disk's size, so a machine cannot
   * write more than its size's disk (EDQUOT in the guest) nor fill the volume other machines write to.
   */
  constructor(private readonly opts: { snapshots?: boolean; quotas?: boolean } = {}) {}

  get snapshots(): boolean {
    return this.opts.snapshots === true;
  }

  async createWritable(blobPath: string, _lower: string[], sizeBytes: number): Promise<void> {
    if (this.snapshots) {
      await createSubvolume(blobPath);
      if (this.opts.quotas) await limitSubvolume(blobPath, Math.floor(sizeBytes));
    } else fs.mkdirSync(blobPath, { recursive: true, mode: 0o755 });
    fs.mkdirSync(path.join(blobPath, 'diff'), { mode: 0o755 });
    fs.mkdirSync(path.join(blobPath, 'work'), { mode: 0o700 });
  }

  async sealLayer(blobPath: string): Promise<void> {
    fs.rmSync(path.join(blobPath, 'work'), { recursive: true, force: true });
    // A layer is immutable: on btrfs that is enforced, not only promised.
    if (isSubvolume(blobPath)) await setReadOnly(blobPath);
  }

  async deleteBlob(blobPath: string): Promise<void> {
    // A read-only subvolume cannot be emptied file by file; it is deleted as a whole.
    if (isSubvolume(blobPath)) await deleteSubvolume(blobPath);
    else fs.rmSync(blobPath, { recursive: true, force: true });
  }

  async blobBytes(blobPath: string): Promise<number> {
    return allocatedBytes(path.join(blobPath, 'diff'));
  }

  /** Duplicate a writable blob that stays in use into a new layer blob (whiteouts, xattrs, owners kept). */
  async copyBlob(src: string, dst: string): Promise<void> {
    await duplicateBlob(src, dst);
  }

  /**
   * One layer with the content of a chain of layers (top first) over the same base: the oldest layer is
   * duplicated, then each newer one is applied on top with overlayfs's rules (a whiteout deletes, an opaque
   * directory replaces, anything else overrides). Whiteouts and opaque directories are kept in the result:
   * they still have to hide what is in the base.
   */
  async flatten(dst: string, layers: string[], _base: string): Promise<void> {
    const oldest = layers[layers.length - 1];
    if (!oldest) throw new Error('nothing to flatten');
    await duplicateBlob(oldest, dst);
    for (const layer of layers.slice(0, -1).reverse()) await applyLayer(path.join(layer, 'diff'), path.join(dst, 'diff'));
  }
}

/** A new blob `dst` with the files of `src`: a writable snapshot of a subvolume, else a copy of its diff/. */
async function duplicateBlob(src: string, dst: string): Promise<void> {
  if (isSubvolume(src)) return snapshot(src, dst);
  fs.mkdirSync(dst, { recursive: true, mode: 0o755 });
  // Tethered (like every command here that writes into a blob): a copy never outlives the control plane.
  await runTethered('cp', ['-a', '--reflink=auto', path.join(src, 'diff'), path.join(dst, 'diff')]);
}

function isWhiteout(st: fs.Stats): boolean {
  return st.isCharacterDevice() && st.rdev === 0;
}

function lstatOrNull(p: string): fs.Stats | null {
  try {
    return fs.lstatSync(p);
  } catch {
    return null;
  }
}

/** Relative paths of the opaque directories (trusted.overlay.opaque = "y") under `dir`. */
async function opaqueDirs(dir: string): Promise<Set<string>> {
  let stdout = '';
  try {
    ({ stdout } = await runTethered('getfattr', ['-R', '-P', '--absolute-names', '-n', 'trusted.overlay.opaque', '-e', 'text', dir], { maxBuffer: 64 * 1024 * 1024 }));
  } catch (e) {
    // getfattr exits 1 when some file lacks the attribute, which is the usual case; its stdout is still whole.
    stdout = (e as { stdout?: string }).stdout ?? '';
  }
  const out = new Set<string>();
  let file: string | null = null;
  for (const line of stdout.split('\n')) {
    if (line.startsWith('# file: ')) file = unescapeGetfattr(line.slice(8));
    else if (file !== null && line === 'trusted.overlay.opaque="y"') out.add(path.relative(dir, file));
  }
  return out;
}

/** getfattr prints unusual bytes of a file name as \ooo octal escapes (and a backslash as \\). */
function unescapeGetfattr(s: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\\' && /^[0-7]{3}$/.test(s.slice(i + 1, i + 4))) {
      bytes.push(parseInt(s.slice(i + 1, i + 4), 8));
      i += 3;
    } else if (s[i] === '\\' && s[i + 1] === '\\') {
      bytes.push(0x5c);
      i += 1;
    } else bytes.push(...Buffer.from(s[i]!, 'utf8'));
  }
  return Buffer.from(bytes).toString('utf8');
}

/** Apply one layer's diff directory onto `dst` (a merged diff of the older layers). */
async function applyLayer(src: string, dst: string): Promise<void> {
  const opaque = await opaqueDirs(src);
  const remove: string[] = [];
  const makeOpaque: string[] = [];
  const walk = (rel: string) => {
    for (const name of fs.readdirSync(path.join(src, rel))) {
      const r = path.join(rel, name);
      const s = fs.lstatSync(path.join(src, r));
      const d = lstatOrNull(path.join(dst, r));
      if (!d) continue; // copied whole below
      if (s.isDirectory() && !opaque.has(r)) {
        if (d.isDirectory()) walk(r);
        else {
          remove.push(r);
          // A directory over an older whiteout must keep hiding what the base has at that path.
          if (isWhiteout(d)) makeOpaque.push(r);
        }
      } else remove.push(r); // files, links, whiteouts and opaque directories replace what was there
    }
  };
  walk('');
  for (const r of remove) fs.rmSync(path.join(dst, r), { recursive: true, force: true });
  await runTethered('cp', ['-a', '--reflink=auto', `${src}/.`, dst]);
  for (const r of makeOpaque) await runTethered('setfattr', ['-n', 'trusted.overlay.opaque', '-v', 'y', path.join(dst, r)]);
}

/** Directory of a chain element as an overlayfs lowerdir: a layer's diff/, or the base root itself. */
export function lowerDir(chainPath: string, base: string): string {
  return chainPath === base ? base : path.join(chainPath, 'diff');
}

/**
 * The mount options of a disk: lowerdirs top first (overlayfs order), its writable upper and work dirs.
 * redirect_dir and metacopy are off explicitly (whatever the host kernel's defaults): with them an upper
 * directory could refer into lower layers, and a captured layer would no longer stand on its own.
 */
export function overlayOptions(lower: string[], base: string, writable: string): string {
  for (const p of [...lower, writable]) if (/[,:]/.test(p)) throw new Error('overlay paths must not contain , or :');
  const opts = `lowerdir=${lower.map((p) => lowerDir(p, base)).join(':')},upperdir=${path.join(writable, 'diff')},workdir=${path.join(writable, 'work')},redirect_dir=off,metacopy=off`;
  // overlayfs takes its options in one page.
  if (opts.length > 4000) throw new Error('overlay mount options too long');
  return opts;
}

export async function mountOverlay(target: string, lower: string[], base: string, writable: string): Promise<void> {
  fs.mkdirSync(target, { recursive: true });
  await run('mount', ['-t', 'overlay', 'overlay', '-o', overlayOptions(lower, base, writable), target]);
}

export async function unmount(target: string): Promise<void> {
  if (!isMounted(target)) return;
  await run('umount', [target]);
}
