/**
 * Where a development checkout keeps what the agent runs as another user: the `computer-spawn` helper
 * (clean-spawn.ts) and the files worker bundle (files/worker-bundle.ts). In a machine both live in the image
 * (`/opt/computer`); a checkout builds them on first use. They must not live in the checkout: the agent's
 * tests run them as the unprivileged `agent` user, and a checkout under a directory closed to others (`/root` is
 * 0700) cannot be entered by that user. Nor is the checkout widened. As root they go to a directory the host's
 * substrate already owns, content-addressed, so checkouts and versions never collide:
 *
 *   /var/lib/computer/libexec/                0755 root   (/var/lib/computer made 0711 if missing: pass, never list)
 *     <sha16 of the inputs>/                  0755 root
 *       computer-spawn                        0755 root   (the key hashes the C source and the compiler flags)
 *       files-worker.mjs                      0644 root   (the key hashes the bundle itself)
 *
 * Each file is written under a temporary name in its directory and renamed into place, so parallel test files
 * (each its own process) race safely: every reader sees a complete file or none. Directories are checked to be
 * ours (the agent user must not be able to swap what it is made to run) and kept 0755. Not as root, the helpers
 * go to the checkout's own `libexec/<sha16>/` (gitignored), as the same user runs them.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export const ROOT_LIBEXEC_BASE = '/var/lib/computer/libexec';

/** Where a checkout's built helpers go for a process with this uid (pure): root's host-wide, others' in the checkout. */
export function devLibexecBase(uid: number, checkout: string): string {
  return uid === 0 ? ROOT_LIBEXEC_BASE : path.join(checkout, 'libexec');
}

/** The content key: the first 16 hex digits of sha256 over the parts, each length-prefixed (pure). */
export function contentKey(parts: readonly (string | Buffer)[]): string {
  const h = crypto.createHash('sha256');
  for (const p of parts) {
    const b = typeof p === 'string' ? Buffer.from(p) : p;
    h.update(`${b.length}:`).update(b);
  }
  return h.digest('hex').slice(0, 16);
}

/** A directory of ours, made if missing, kept `mode`; throws if it is anything else (a symlink, another owner's). */
function ownDir(dir: string, mode: number): void {
  fs.mkdirSync(dir, { recursive: true, mode });
  const st = fs.lstatSync(dir);
  const uid = process.getuid?.() ?? st.uid;
  if (!st.isDirectory() || st.uid !== uid) throw new Error(`${dir} is not a directory owned by uid ${uid}; remove it`);
  if ((st.mode & 0o7777) !== mode) fs.chmodSync(dir, mode);
}

export interface Artifact {
  /** The base directory (devLibexecBase). */
  base: string;
  /** The content key (contentKey of everything the file is made from). */
  key: string;
  name: string;
  /** The file's mode: 0o755 for a program, 0o644 for what is only read. */
  mode: number;
  /** Makes the file at `tmp` (a path in the final directory, not yet existing). */
  write(tmp: string): void;
}

/** `<base>/<key>/<name>`, made with `write` unless it is already there. */
export function installArtifact(a: Artifact): string {
  const dir = path.join(a.base, a.key);
  const out = path.join(dir, a.name);
  const have = fs.lstatSync(out, { throwIfNoEntry: false });
  if (have?.isFile()) return out;
  // Above the base: as /var/lib/computer is kept elsewhere (container/reach.ts), others pass but never list.
  fs.mkdirSync(path.dirname(a.base), { recursive: true, mode: 0o711 });
  ownDir(a.base, 0o755);
  ownDir(dir, 0o755);
  const tmp = path.join(dir, `.${a.name}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`);
  try {
    a.write(tmp);
    fs.chmodSync(tmp, a.mode);
    fs.renameSync(tmp, out);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  return out;
}
