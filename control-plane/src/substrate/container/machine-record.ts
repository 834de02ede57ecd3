/**
 * What the container substrate records of each machine (`<root>/machines/<id>/machine.json`, records.ts), and
 * where a machine's agent socket is: known from the record alone, without the substrate object, so a restarted
 * control plane reaches running machines before its guest image is checked (machine-host.ts).
 */
import path from 'node:path';
import { assertMachineId, dropEnrollmentSecret, type EarlyChannel, type MachineResources } from '../substrate.js';
import { peekRecord } from '../records.js';
import { machineDirs, reachDirFor, type MachinePlace } from './reach.js';

export interface MachineRecord {
  id: string;
  resources: MachineResources;
  disk: string;
  network: 'none' | 'outbound';
  /** Kernel boot id when last started: a container "running" since another boot is lost. */
  boot?: string;
  /** podman's container id (from `podman create`): names the container's cgroup without asking podman. */
  ctrId?: string;
  /** outbound: the machine's IPv4 address on this root's bridge (its MAC is derived from it). */
  address?: string;
  /** outbound, while running: the host side of its veth (guarded on the bridge). */
  port?: string;
  /**
   * A live capture's freeze, recorded before the container is frozen and cleared once it is thawed: a control
   * plane killed in between leaves it here, and the next one thaws the container when it starts.
   */
  frozen?: Freeze;
  /** Where its mount point and channel directory are (reach.ts); absent: under the root (made before). */
  place?: MachinePlace;
  /** The guest's hostname (identity.ts); absent: made before machines had their own (`computer`). */
  hostname?: string;
}

/** How a container was frozen: through its cgroup v1 freezer (the cgroup's path), or `podman pause`. */
export type Freeze = { how: 'cgroup'; cgroup: string } | { how: 'podman' };

/** Where a machine's record says its mount point and channel are (a machine not yet recorded: the reach dir). */
function placeOf(root: string, id: string): MachinePlace {
  const rec = peekRecord<MachineRecord>(root, id);
  return rec ? (rec.place ?? 'root') : 'reach';
}

/**
 * A machine's agent socket: known without the substrate object, so a restarted control plane reaches running
 * machines before its guest image is checked (machine-host.ts).
 */
export function containerChannelPath(root: string, id: string, reach = reachDirFor(root)): string {
  assertMachineId(id);
  return path.join(machineDirs({ root, reach }, id, placeOf(root, id)).channel, 'agent.sock');
}

/** The channel of a machine under a substrate root, usable before the substrate object exists (machine-host.ts). */
export function containerEarlyChannel(root: string, reach = reachDirFor(root)): EarlyChannel {
  return {
    channelPath: (id) => containerChannelPath(root, id, reach),
    issueEnrollment: async (id) => dropEnrollmentSecret(path.dirname(containerChannelPath(root, id, reach))),
  };
}
