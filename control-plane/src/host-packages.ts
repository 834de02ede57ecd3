/**
 * `npm start` on a fresh host: the programs the chosen substrate and the guest image build run are checked up
 * front, before anything listens, instead of failing later with an obscure error. As root on Debian the missing
 * packages are installed by scripts/setup-host.sh with its progress on the terminal; otherwise the one command
 * to run is printed and the start stops.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { SubstrateKind } from './substrate/substrate.js';

/** program → the Debian package that ships it (the list scripts/setup-host.sh installs is the source). */
const CONTAINER_TOOLS: Record<string, string> = {
  podman: 'podman', runc: 'runc', conmon: 'conmon', iptables: 'iptables', ebtables: 'iptables', ip: 'iproute2',
  'mkfs.btrfs': 'btrfs-progs', btrfs: 'btrfs-progs', getfattr: 'attr', setfattr: 'attr', newuidmap: 'uidmap',
  python3: 'python3',
};
const VM_TOOLS: Record<string, string> = {
  'qemu-system-x86_64': 'qemu-system-x86', 'qemu-img': 'qemu-utils', ip: 'iproute2', iptables: 'iptables', ebtables: 'iptables',
};
/** The guest image build (images/build.sh), whichever substrate. */
const IMAGE_TOOLS: Record<string, string> = { mmdebstrap: 'mmdebstrap', 'mkfs.ext4': 'e2fsprogs', cpio: 'cpio', 'qemu-img': 'qemu-utils' };

/** The packages that provide the programs `kind` needs and `has` cannot find, sorted, without repeats. */
export function missingPackages(kind: SubstrateKind, has: (program: string) => boolean): string[] {
  if (kind === 'fake') return [];
  const need = { ...IMAGE_TOOLS, ...(kind === 'container' ? CONTAINER_TOOLS : VM_TOOLS) };
  return [...new Set(Object.entries(need).filter(([prog]) => !has(prog)).map(([, pkg]) => pkg))].sort();
}

/** What an operator who is not root runs (the script installs everything the service uses; idempotent). */
export function setupCommand(repoRoot: string): string {
  return `sudo bash ${path.join(repoRoot, 'scripts', 'setup-host.sh')}`;
}

export function onPath(program: string, pathVar = process.env.PATH ?? ''): boolean {
  // root's tools live in sbin, which a non-login PATH may lack.
  const dirs = [...pathVar.split(':'), '/usr/local/sbin', '/usr/sbin', '/sbin'];
  return dirs.some((d) => {
    try {
      fs.accessSync(path.join(d, program), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * Make sure the host has what `kind` needs. Returns normally when it does (after installing, as root with
 * apt-get); throws with the command to run when it does not.
 */
export function ensureHostPackages(o: {
  kind: SubstrateKind;
  repoRoot: string;
  say: (line: string) => void;
  has?: (p: string) => boolean;
  /** Whether installing is possible; default: root with apt-get. */
  canInstall?: boolean;
}): void {
  const has = o.has ?? ((p: string) => onPath(p));
  const missing = missingPackages(o.kind, has);
  if (!missing.length) return;
  const canInstall = o.canInstall ?? (process.getuid?.() === 0 && onPath('apt-get'));
  if (!canInstall) {
    throw new Error(`the ${o.kind} substrate needs system packages this host lacks (${missing.join(', ')}); install them with:\n  ${setupCommand(o.repoRoot)}`);
  }
  o.say(`host: installing ${missing.join(', ')} (scripts/setup-host.sh; apt-get output follows)`);
  const r = spawnSync('bash', [path.join(o.repoRoot, 'scripts', 'setup-host.sh')], { stdio: 'inherit' });
  const still = missingPackages(o.kind, has);
  if (r.status !== 0 || still.length) {
    throw new Error(`installing the system packages failed (${still.join(', ') || `exit ${r.status}`}); run it by hand:\n  ${setupCommand(o.repoRoot)}`);
  }
}
