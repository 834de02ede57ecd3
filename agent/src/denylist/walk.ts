/**
 * Race-free path resolution for the files API.
 *
 * Node has no openat(2), so each step opens `/proc/self/fd/<dirfd>/<name>`: the kernel resolves the
 * magic link to the directory we HOLD (not to a path that could be swapped since), then looks up
 * exactly one name in it. Every open uses O_NOFOLLOW, so a symlink is never followed by the kernel:
 * we read its target, put the hop through the denylist and continue resolving the text ourselves.
 * Whatever an attacker swaps between our steps, the object we finally use is an fd we opened and
 * checked (path prefixes AND device/inode identity), never a path re-resolved later.
 */
import fs from 'node:fs';
import { AppError, invalid } from '../../../shared/errors.js';
import type { DenyPolicy } from './decide.js';
import { ERRORS } from '../errors.js';

/** O_PATH: a handle for lookups and fstat that does not open the object (no device side effects). */
export const O_PATH = 0o10000000;
const { O_NOFOLLOW, O_DIRECTORY } = fs.constants;
export const MAX_SYMLINK_HOPS = 40;

export function fdPath(fd: number, name?: string): string {
  return name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`;
}

/** Identities (dev:ino, and rdev of devices) of denied objects, captured at start. */
export interface DeniedIdentities {
  inodes: Set<string>;
  rdevs: Set<number>;
}

export interface WalkOptions {
  /** Return a missing final component instead of 404 (writes create it). */
  allowMissingLeaf?: boolean;
  /** Create missing intermediate directories, owned by this uid/gid (mode 0755). */
  createDirs?: { uid: number; gid: number } | null;
}

export interface Walked {
  /** O_PATH fd of the directory holding the final component. */
  parentFd: number;
  /** Name of the final component in that directory ('' when the path is `/`). */
  name: string;
  /** O_PATH fd of the final object, or null when it does not exist (only with allowMissingLeaf). */
  fd: number | null;
  stat: fs.Stats | null;
  /** The resolved, symlink-free path (for messages to the client only; never logged). */
  resolved: string;
  close(): void;
}

interface Frame {
  name: string;
  fd: number;
}

export function denied(asked: string): AppError {
  return ERRORS.accessDenied(asked);
}

function errno(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | undefined)?.code;
}

export function identityDenied(st: fs.Stats, ids: DeniedIdentities): boolean {
  if (ids.inodes.has(`${st.dev}:${st.ino}`)) return true;
  if ((st.isCharacterDevice() || st.isBlockDevice()) && ids.rdevs.has(st.rdev)) return true;
  return false;
}

/**
 * Resolve `asked` component by component under the denylist. Throws permission_denied, not_found,
 * or invalid_request (not a directory, too many symlinks). The caller must call `close()`.
 */
export function walk(asked: string, policy: DenyPolicy, ids: DeniedIdentities, opts: WalkOptions = {}): Walked {
  // Security gate 1: the path as written (and its lexical normalization, prefix by prefix).
  if (policy.deniedBy(asked)) throw denied(asked);

  const stack: Frame[] = [];
  const closeAll = () => {
    for (const f of stack) safeClose(f.fd);
    stack.length = 0;
  };
  const here = () => (stack.length <= 1 ? '' : '/' + stack.slice(1).map((f) => f.name).join('/'));

  try {
    const rootFd = fs.openSync('/', O_PATH | O_DIRECTORY);
    stack.push({ name: '', fd: rootFd });
    let remaining = asked.split('/');
    let hops = 0;

    for (;;) {
      // Drop empty and '.' components; '..' pops the resolved (symlink-free) stack, which is what the
      // kernel's '..' does on a path whose symlinks are already expanded.
      while (remaining.length && (remaining[0] === '' || remaining[0] === '.' || remaining[0] === '..')) {
        const c = remaining.shift();
        if (c === '..' && stack.length > 1) safeClose(stack.pop()!.fd);
      }
      if (!remaining.length) break;
      const c = remaining.shift()!;
      const isLast = remaining.every((x) => x === '' || x === '.');
      const parent = stack[stack.length - 1]!;
      const candidate = here() + '/' + c;
      // Security gate 2: every resolved prefix (and so the fully resolved path).
      if (policy.deniedBy(candidate)) throw denied(asked);

      let fd: number;
      try {
        fd = fs.openSync(fdPath(parent.fd, c), O_PATH | O_NOFOLLOW);
      } catch (e) {
        const code = errno(e);
        if (code === 'ENOENT' && isLast && opts.allowMissingLeaf) {
          return finish(parent.fd, c, null, null, candidate);
        }
        if (code === 'ENOENT' && !isLast && opts.createDirs) {
          try {
            fs.mkdirSync(fdPath(parent.fd, c), 0o755);
            fs.chownSync(fdPath(parent.fd, c), opts.createDirs.uid, opts.createDirs.gid);
          } catch (me) {
            if (errno(me) !== 'EEXIST') throw me;
          }
          // Re-open it like any other component: if it was raced into a symlink, gate 3 sees that.
          remaining.unshift(c);
          continue;
        }
        if (code === 'ENOENT') throw ERRORS.noSuchPath(asked);
        if (code === 'ENOTDIR') throw invalid(`A component of ${asked} is not a directory.`, [{ field: 'path', message: 'not a directory' }]);
        if (code === 'ENAMETOOLONG') throw invalid(`A component of ${asked} is too long.`, [{ field: 'path', message: 'name too long' }]);
        if (code === 'EACCES' || code === 'EPERM') throw ERRORS.accessNotPermitted(asked);
        throw e;
      }
      const st = fs.fstatSync(fd);

      if (st.isSymbolicLink()) {
        safeClose(fd);
        if (++hops > MAX_SYMLINK_HOPS) {
          throw invalid(`Too many levels of symbolic links in ${asked}.`, [{ field: 'path', message: 'too many symbolic links' }]);
        }
        let target: string;
        try {
          target = fs.readlinkSync(fdPath(parent.fd, c));
        } catch (e) {
          // Swapped away between our open and readlink: look the name up again (bounded by hops).
          if (errno(e) === 'EINVAL' || errno(e) === 'ENOENT') {
            remaining.unshift(c);
            continue;
          }
          if (errno(e) === 'EACCES' || errno(e) === 'EPERM') throw ERRORS.accessNotPermitted(asked);
          throw e;
        }
        const rest = remaining.join('/');
        const hop = target.startsWith('/') ? target : here() + '/' + target;
        // Security gate 3: every symlink hop, as the path it makes together with what remains.
        if (policy.deniedBy(hop + (rest ? '/' + rest : ''))) throw denied(asked);
        if (target.startsWith('/')) {
          while (stack.length > 1) safeClose(stack.pop()!.fd);
        }
        remaining = [...target.split('/'), ...remaining];
        continue;
      }

      // Security gate 4: identity. Catches hard links, bind mounts and device nodes of denied objects.
      if (identityDenied(st, ids)) {
        safeClose(fd);
        throw denied(asked);
      }
      if (isLast) return finish(parent.fd, c, fd, st, candidate);
      if (!st.isDirectory()) {
        safeClose(fd);
        throw invalid(`A component of ${asked} is not a directory.`, [{ field: 'path', message: 'not a directory' }]);
      }
      stack.push({ name: c, fd });
    }
    // The path resolved to `/` itself.
    const root = stack[0]!;
    const st = fs.fstatSync(root.fd);
    const fd = fs.openSync(fdPath(root.fd), O_PATH | O_DIRECTORY);
    return finish(root.fd, '', fd, st, '/');
  } catch (e) {
    closeAll();
    throw e;
  }

  function finish(parentFd: number, name: string, fd: number | null, stat: fs.Stats | null, resolved: string): Walked {
    // Keep only the parent (and the final fd); release the rest of the chain.
    const keep = stack.findIndex((f) => f.fd === parentFd);
    for (let i = 0; i < stack.length; i++) if (i !== keep) safeClose(stack[i]!.fd);
    stack.length = 0;
    let closed = false;
    return {
      parentFd,
      name,
      fd,
      stat,
      resolved,
      close() {
        if (closed) return;
        closed = true;
        safeClose(parentFd);
        if (fd !== null) safeClose(fd);
      },
    };
  }
}

export function safeClose(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    /* already closed */
  }
}
