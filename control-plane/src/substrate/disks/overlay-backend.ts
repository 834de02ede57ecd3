/**
 * Layer blobs as overlayfs directories: <blob>/diff holds the files (with overlayfs whiteouts and opaque
 * xattrs), a writable blob also has <blob>/work. The base is a plain read-only root directory.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { allocatedBytes, type BlobBackend } from './layer-store.js';

const run = promisify(execFile);

export class OverlayBackend implements BlobBackend {
  readonly blobSuffix = '';

  async createWritable(blobPath: string): Promise<void> {
    fs.mkdirSync(path.join(blobPath, 'diff'), { recursive: true, mode: 0o755 });
    fs.mkdirSync(path.join(blobPath, 'work'), { recursive: true, mode: 0o700 });
  }

  async sealLayer(blobPath: string): Promise<void> {
    fs.rmSync(path.join(blobPath, 'work'), { recursive: true, force: true });
  }

  async deleteBlob(blobPath: string): Promise<void> {
    fs.rmSync(blobPath, { recursive: true, force: true });
  }

  async blobBytes(blobPath: string): Promise<number> {
    return allocatedBytes(path.join(blobPath, 'diff'));
  }
}

/** Directory of a chain element as an overlayfs lowerdir: a layer's diff/, or the base root itself. */
export function lowerDir(chainPath: string, base: string): string {
  return chainPath === base ? base : path.join(chainPath, 'diff');
}

/** The mount options of a disk: lowerdirs top first (overlayfs order), its writable upper and work dirs. */
export function overlayOptions(lower: string[], base: string, writable: string): string {
  for (const p of [...lower, writable]) if (/[,:]/.test(p)) throw new Error('overlay paths must not contain , or :');
  const opts = `lowerdir=${lower.map((p) => lowerDir(p, base)).join(':')},upperdir=${path.join(writable, 'diff')},workdir=${path.join(writable, 'work')}`;
  // overlayfs takes its options in one page.
  if (opts.length > 4000) throw new Error('overlay mount options too long');
  return opts;
}

export async function mountOverlay(target: string, lower: string[], base: string, writable: string): Promise<void> {
  fs.mkdirSync(target, { recursive: true });
  await run('mount', ['-t', 'overlay', 'overlay', '-o', overlayOptions(lower, base, writable), target]);
}

export function isMounted(target: string): boolean {
  const abs = path.resolve(target);
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .some((l) => l.split(' ')[4] === abs);
}

export async function unmount(target: string): Promise<void> {
  if (!isMounted(target)) return;
  await run('umount', [target]);
}

/** Copy a writable blob's files into a new layer blob, keeping whiteouts, xattrs (opaque dirs) and owners. */
export async function copyBlob(src: string, dst: string): Promise<void> {
  fs.mkdirSync(dst, { recursive: true });
  await run('cp', ['-a', '--reflink=auto', path.join(src, 'diff'), path.join(dst, 'diff')]);
}
