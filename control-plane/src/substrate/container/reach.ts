/**
 * Where a container machine's guest uids must reach, outside the substrate root (docs/substrates.md, "Where
 * container machines live"). runc mounts a machine's root filesystem (its overlay mount point) and bind-mounts
 * its channel directory while running as guest root, which is an unprivileged host uid (idmap.ts): every
 * directory above those two must let that uid through. The substrate root lives in DATA_DIR, which holds the
 * database and the secrets keyring and stays 0700 (as may the checkout's parents, e.g. /root), so the two live
 * here instead, in a directory the substrate owns:
 *
 *   /var/lib/computer/containers            0711 root   (and /var/lib/computer: others may pass, never list)
 *     <key>/                                0710 root:<guest root>   key: a hash of the substrate root's path
 *       <machine id>/                       0710 root:<guest root>
 *         merged/                           the machine's overlay mount point (the guest's own files)
 *         channel/                          0700 <guest root>: the agent's socket
 *
 * Nothing of DATA_DIR is in it: the disk layers, machine records, podman's state and the keyring stay in the
 * substrate root. Each substrate root (one per control plane) has its own key, so two control planes on one host
 * never share a directory.
 */
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** The substrate-owned directory under which each substrate root has its own. */
export const DEFAULT_REACH_BASE = '/var/lib/computer/containers';

/** The reach directory of a substrate root: one per root path (pure). */
export function reachDirFor(root: string, base = DEFAULT_REACH_BASE): string {
  return path.join(base, crypto.createHash('sha256').update(path.resolve(root)).digest('hex').slice(0, 12));
}

/**
 * Where a machine's mount point and channel directory are. `reach` for machines made (or started) since the reach
 * directory exists; `root` for a machine made before, whose are in its directory under the substrate root until
 * its next start moves them (docs/substrates.md).
 */
export type MachinePlace = 'reach' | 'root';

export interface MachineDirs {
  /** The directory holding the two. */
  dir: string;
  merged: string;
  channel: string;
}

export function machineDirs(dirs: { root: string; reach: string }, id: string, place: MachinePlace): MachineDirs {
  const dir = place === 'reach' ? path.join(dirs.reach, id) : path.join(dirs.root, 'machines', id);
  return { dir, merged: path.join(dir, 'merged'), channel: path.join(dir, 'channel') };
}

/** `dir` and every directory above it, from `/` down (pure). */
export function ancestry(dir: string): string[] {
  const out: string[] = [];
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    out.unshift(d);
    if (d === path.dirname(d)) return out;
  }
}

/** The first of `dirs` (in order) a process with this uid and gid cannot enter; null when it enters them all. */
export type EnterCheck = (dirs: string[], uid: number, gid: number) => string | null;

/** A shell running as the uid (no supplementary groups) tries `cd` into each: what the kernel lets runc do. */
export const enterAs: EnterCheck = (dirs, uid, gid) => {
  const r = spawnSync('/bin/sh', ['-c', 'for d; do cd -- "$d" 2>/dev/null || { printf %s "$d"; exit 1; }; done', 'sh', ...dirs], {
    uid, gid, encoding: 'utf8', timeout: 10_000,
  });
  if (r.status === 0) return null;
  return r.stdout || dirs[dirs.length - 1]!;
};

/**
 * Throws an operator-facing error naming the directory that stops guest root (host uid `uid`) from reaching
 * `reach`, if one does.
 */
export function assertGuestReaches(reach: string, uid: number, enter: EnterCheck = enterAs): void {
  const blocked = enter(ancestry(reach), uid, uid);
  if (blocked === null) return;
  throw new Error(
    `container substrate: guest root runs as host uid ${uid}, which cannot enter ${blocked}, so no machine could start ` +
      `(runc mounts each machine's root and channel under ${reach}); let other users pass through it (chmod o+x ${blocked}), ` +
      'keeping it unreadable to them',
  );
}

/**
 * Make the reach directory of a root: the base and its parent (the substrate's own) passable by anyone (o+x,
 * added only), the root's own directory open to its guest root's group only.
 */
export function makeReachDir(reach: string, guestRoot: number | null): void {
  const base = path.dirname(reach);
  for (const d of [path.dirname(base), base]) {
    fs.mkdirSync(d, { recursive: true, mode: 0o711 });
    const mode = fs.statSync(d).mode & 0o7777;
    if ((mode & 0o001) === 0) fs.chmodSync(d, mode | 0o001);
  }
  fs.mkdirSync(reach, { recursive: true, mode: 0o700 });
  guestPassable(reach, guestRoot);
}

/** root:<guest root> 0710: host root and guest root pass, nobody else (0700 root for roots without a range). */
export function guestPassable(dir: string, guestRoot: number | null): void {
  fs.chownSync(dir, 0, guestRoot ?? 0);
  fs.chmodSync(dir, guestRoot === null ? 0o700 : 0o710);
}

/**
 * A machine's directory in the reach dir: passable by guest root only. The channel directory in it is the
 * agent's only door: 0700 guest root (host root otherwise). Nothing that opens it is stored there: a fresh
 * agent gets a one-time secret just before its enrollment (issueEnrollment).
 */
export function makeMachinePlace(dirs: { root: string; reach: string }, id: string, guestRoot: number | null): void {
  const at = machineDirs(dirs, id, 'reach');
  fs.mkdirSync(at.dir, { recursive: true, mode: 0o700 });
  guestPassable(at.dir, guestRoot);
  fs.mkdirSync(at.merged, { recursive: true });
  fs.mkdirSync(at.channel, { recursive: true, mode: 0o700 });
  if (guestRoot !== null) fs.chownSync(at.channel, guestRoot, guestRoot);
}
