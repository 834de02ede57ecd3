/**
 * Guest uids in a private host range. A container runs in a user namespace mapping guest uids 0..65535 to
 * host uids base..base+65535, so guest root is an unprivileged host uid and guest uid 1000 is not host uid
 * 1000 (a host account cannot read a guest process's /proc files).
 *
 * The guest image's root directory is shared by every root and owned by host uid 0 on disk. Overlayfs cannot
 * itself be idmapped, and an idmapped upper layer breaks its work directory (the mounter, host root, is not in
 * the mapping), so only the base image is: an idmapped bind mount of it (`<root>/bases/<hash>`, made once and
 * kept) shows its uid 0 files as uid `base`, and every layer above it (the writable layer and what captures
 * freeze of it) is written by the guest through the overlay with host uids of the range, as they are.
 * Layers are therefore tied to their root's range, which is the root's for its life.
 *
 * The kernel calls (open_tree, mount_setattr, move_mount; a user namespace to name the mapping) have no
 * command-line tool on Debian 12 (util-linux 2.38 lacks X-mount.idmap), so a short python3 program
 * (setup-host.sh installs python3) makes the mount; this module is its only caller.
 */
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Guest uids/gids mapped per root. */
export const GUEST_ID_COUNT = 65536;
/** First host uid of the ranges: above any distribution's subuid ranges and login uids. */
const RANGE_START = 2 ** 30;

/** The host uid (and gid) of guest uid 0 for the root holding host-wide slot `index` (see net/machine-net.ts). */
export function uidBaseFor(index: number): number {
  return RANGE_START + index * GUEST_ID_COUNT;
}

/** `podman create` arguments of the mapping (pure). */
export function idmapArgs(base: number): string[] {
  return ['--uidmap', `0:${base}:${GUEST_ID_COUNT}`, '--gidmap', `0:${base}:${GUEST_ID_COUNT}`];
}

/**
 * python3 -S -c: argv = base, count, src, dst. Makes a user namespace with the mapping (a child that unshares
 * and waits), clones `src` as a detached mount, sets the idmapping on it and attaches it at `dst`.
 */
const IDMAP_MOUNT_PY = String.raw`
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
class MountAttr(ctypes.Structure):
    _fields_ = [('attr_set', ctypes.c_uint64), ('attr_clr', ctypes.c_uint64), ('propagation', ctypes.c_uint64), ('userns_fd', ctypes.c_uint64)]
def check(r, what):
    if r < 0:
        sys.stderr.write(what + ': ' + os.strerror(ctypes.get_errno()) + '\n')
        sys.exit(1)
    return r
base, count, src, dst = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    if libc.unshare(0x10000000) != 0:
        os._exit(1)
    os.read(r, 1)
    os._exit(0)
os.close(r)
mine = os.readlink('/proc/self/ns/user')
for _ in range(2000):
    if os.readlink('/proc/%d/ns/user' % pid) != mine:
        break
    time.sleep(0.0005)
else:
    sys.exit('user namespace not made')
for f in ('uid_map', 'gid_map'):
    with open('/proc/%d/%s' % (pid, f), 'w') as fh:
        fh.write('0 %d %d\n' % (base, count))
ns = os.open('/proc/%d/ns/user' % pid, os.O_RDONLY | os.O_CLOEXEC)
os.close(w)
os.waitpid(pid, 0)
fd = check(libc.syscall(428, -100, src.encode(), 1 | 0o2000000), 'open_tree')
attr = MountAttr(0x00100000, 0, 0, ns)
check(libc.syscall(442, fd, b'', 0x1000, ctypes.byref(attr), ctypes.sizeof(attr)), 'mount_setattr')
check(libc.syscall(429, fd, b'', -100, dst.encode(), 4), 'move_mount')
`;

function mounted(p: string): boolean {
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .some((l) => l.split(' ')[4] === p);
}

/**
 * The idmapped view of a base image directory for a root (mounted on first use, then kept; made again after
 * a reboot). `bases` is the root's directory for these mounts.
 */
export function idmappedBase(bases: string, base: string, uidBase: number): Promise<string> {
  const dst = path.join(bases, crypto.createHash('sha256').update(path.resolve(base)).digest('hex').slice(0, 16));
  if (mounted(dst)) return Promise.resolve(dst);
  // Two machines starting at once must not stack two mounts on one directory.
  let p = making.get(dst);
  if (!p) {
    p = (async () => {
      fs.mkdirSync(dst, { recursive: true, mode: 0o700 });
      // /usr/bin/python3 directly (not a shim on PATH): ~20 ms with -S.
      const py = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
      await run(py, ['-S', '-c', IDMAP_MOUNT_PY, String(uidBase), String(GUEST_ID_COUNT), path.resolve(base), dst]);
      return dst;
    })().finally(() => making.delete(dst));
    making.set(dst, p);
  }
  return p;
}

const making = new Map<string, Promise<string>>();
