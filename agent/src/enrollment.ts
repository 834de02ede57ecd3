/**
 * The agent's credential (issue 10 item 9; design and threat model in docs/security.md).
 *
 * Nothing the agent accepts is ever at rest in the guest. The control plane holds a per-machine key (in its
 * database, never in the guest) and hands it to each agent process once, on `POST /auth/enroll`; the agent
 * keeps it in memory only and every other route requires it. How a fresh agent process (boot, or restarted
 * by the guest's init) tells the control plane's enrollment apart from a guest process's:
 *
 * - `file` (container): the control plane drops a one-time secret into the channel directory (0700 guest
 *   root, a host bind mount) just before it enrolls. The agent reads it at that moment and unlinks it
 *   whatever the outcome, so a secret is accepted at most once and none lies around afterwards.
 * - `channel` (VM): the agent serves only the virtio-serial port, whose other end only the host can open
 *   (and the guest side is exclusive while the agent holds it): the first enrollment on it is the host's.
 *   No secret exists at all (fw_cfg, which cannot change while QEMU runs, is no longer used).
 *
 * Guest root can still read the agent's memory, or kill the agent and race for the next secret: that yields
 * exactly what it already has, its own agent, and never a credential usable outside its machine.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';

export type EnrollmentSource = { kind: 'file'; path: string } | { kind: 'channel' };

/** A secret file bigger than this is not one the control plane wrote. */
const MAX_SECRET_BYTES = 1024;
const MIN_SECRET_CHARS = 16;

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/** Digests are compared, so the comparison takes the same time whatever the values' length or content. */
function same(a: Buffer, given: string): boolean {
  return timingSafeEqual(a, digest(given));
}

/**
 * Read and consume the one-time secret: no symlink, a regular file only its owner may read, bounded. It is
 * unlinked before its content is even looked at, so a malformed or wrong secret is gone as well.
 */
export function takeSecretFile(file: string): string | null {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch {
    // A symlink (or whatever else cannot be opened as a file) is consumed too: unlinking a link leaves its target.
    unlinkQuietly(file);
    return null;
  }
  try {
    unlinkQuietly(file);
    const st = fs.fstatSync(fd);
    if (!st.isFile() || (st.mode & 0o077) !== 0 || st.size > MAX_SECRET_BYTES) return null;
    const buf = Buffer.alloc(MAX_SECRET_BYTES + 1);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    const secret = buf.subarray(0, n).toString('utf8').trim();
    return secret.length >= MIN_SECRET_CHARS ? secret : null;
  } finally {
    fs.closeSync(fd);
  }
}

function unlinkQuietly(file: string): void {
  try {
    fs.unlinkSync(file);
  } catch {
    /* gone already, or a directory (which only guest root can make, and only to refuse its own agent) */
  }
}

export class Enrollment {
  private key: Buffer | null = null;

  constructor(readonly source: EnrollmentSource) {}

  get enrolled(): boolean {
    return this.key !== null;
  }

  /** Whether `bearer` is the current key. False before the first enrollment. */
  authorized(bearer: string | null): boolean {
    return this.key !== null && bearer !== null && same(this.key, bearer);
  }

  /**
   * Install `newKey` if `bearer` proves the caller is the control plane: the current key (rotation, or a
   * reconnect confirming it), or, for a fresh agent process only, the one-time secret (file) or nothing at
   * all (channel). Returns whether it was installed.
   */
  enroll(bearer: string | null, newKey: string): boolean {
    if (this.key !== null) {
      if (!this.authorized(bearer)) return false;
    } else if (this.source.kind === 'file') {
      const secret = takeSecretFile(this.source.path);
      if (secret === null || bearer === null || !same(digest(secret), bearer)) return false;
    }
    this.key = digest(newKey);
    return true;
  }
}
