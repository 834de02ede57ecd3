/**
 * A machine's own identity inside its guest (issue 26 item 1): `/etc/machine-id` (32 random lowercase hex and a
 * newline, written by the host) and a hostname derived from it, `computer-<its first 12 hex>`: per machine, yet
 * naming neither the machine's API id nor anything of the substrate (guest files name neither: issue 10 item
 * 10, docs/security.md "Guest files"). A warm pool member has one of its own; the take replaces both
 * (docs/api-machines.md, "Warm starts"). `computer` stays an alias of 127.0.1.1 in `/etc/hosts`.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ERRORS } from '../errors.js';

/** The image's own hostname, kept as an alias in every machine's /etc/hosts (and a machine made before identities). */
export const IMAGE_HOSTNAME = 'computer';

export interface MachineIdentity {
  /** 32 lowercase hex characters (the file adds the newline). */
  machineId: string;
  hostname: string;
}

/** A fresh identity: a random machine-id and the hostname it gives. */
export function newIdentity(): MachineIdentity {
  const machineId = randomBytes(16).toString('hex');
  return { machineId, hostname: `${IMAGE_HOSTNAME}-${machineId.slice(0, 12)}` };
}

/** The files that carry an identity, by their name under the guest's `/etc`. */
export function identityFiles(identity: MachineIdentity): Record<'machine-id' | 'hostname' | 'hosts', string> {
  return {
    'machine-id': `${identity.machineId}\n`,
    hostname: `${identity.hostname}\n`,
    hosts: `127.0.0.1\tlocalhost\n127.0.1.1\t${identity.hostname} ${IMAGE_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n`,
  };
}

/**
 * Write the identity files into a guest root seen from the host (a container's overlay mount), owned by guest
 * root (`uid`). The root may come from a tenant's template or fork, so nothing in it is followed: `etc` must be a
 * real directory, and each file is created anew beside its target (O_EXCL | O_NOFOLLOW) and renamed over it,
 * which replaces a symlink or file there without following it (a directory there is removed first).
 */
export function writeGuestIdentity(root: string, identity: MachineIdentity, uid: number | null): void {
  const etc = path.join(root, 'etc');
  if (!fs.lstatSync(etc, { throwIfNoEntry: false })?.isDirectory()) throw ERRORS.guestRootUnusable();
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
  for (const [name, text] of Object.entries(identityFiles(identity))) {
    const target = path.join(etc, name);
    const tmp = path.join(etc, `.${name}.computer-new`);
    fs.rmSync(tmp, { force: true, recursive: true });
    if (fs.lstatSync(target, { throwIfNoEntry: false })?.isDirectory()) fs.rmSync(target, { recursive: true, force: true });
    const fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644);
    try {
      fs.writeSync(fd, text);
      if (uid !== null) fs.fchownSync(fd, uid, uid);
      fs.fchmodSync(fd, 0o644);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, target);
  }
}
