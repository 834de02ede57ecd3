/**
 * The podman container of each machine: made from the machine's record (its place, address and the root's uid
 * range), started, and replaced when podman can no longer drive it. Everything the machine is lives outside
 * podman (disk chain, channel directory, address), so a container is always disposable.
 */
import { IMAGE_HOSTNAME } from '../identity.js';
import { ERRORS } from '../../errors.js';
import type { MachineRecords } from '../records.js';
import { macFor } from '../net/network.js';
import { killCgroup } from './cgroup.js';
import type { MachineRecord } from './machine-record.js';
import { containerName, createArgs, globalArgs } from './podman-argv.js';
import type { Podman } from './podman.js';
import type { MachineDirs } from './reach.js';

export class MachineContainers {
  constructor(
    private readonly o: {
      podman: Podman;
      records: MachineRecords<MachineRecord>;
      /** Host uid of guest root (null: a root older than private ranges). */
      uidBase: number | null;
      /** A machine's mount point and channel directory. */
      placed: (rec: MachineRecord) => MachineDirs;
      warn?: (msg: string) => void;
    },
  ) {}

  /** `podman create` for a machine record: at create, and again when a broken container is replaced. */
  async create(rec: MachineRecord): Promise<void> {
    const { podman, uidBase } = this.o;
    const created = await podman.run(
      createArgs(podman.env, {
        id: rec.id,
        resources: rec.resources,
        rootfs: this.o.placed(rec).merged,
        channelDir: this.o.placed(rec).channel,
        network: rec.network,
        hostname: rec.hostname ?? IMAGE_HOSTNAME,
        ...(rec.address ? { nic: { address: rec.address, mac: macFor(rec.address) } } : {}),
        ...(uidBase !== null ? { uidBase } : {}),
      }).slice(globalArgs(podman.env).length),
    );
    const ctrId = created.stdout.trim().split('\n').pop() ?? '';
    if (/^[0-9a-f]{64}$/.test(ctrId)) rec.ctrId = ctrId;
    else delete rec.ctrId;
    this.o.records.write(rec);
  }

  /**
   * Replace a container podman can no longer drive. When its monitor (conmon) is killed, podman waits for an
   * exit file nobody writes: `stop` fails after its timeout and leaves the container `stopping` (or `stopped`
   * with exit code -1), and `start` can fail the same way. Everything the machine is lives outside podman
   * (disk chain, channel directory, address), so whatever is left of the container's processes
   * is killed, the container is force-removed and created again on the same disk.
   */
  async recreate(rec: MachineRecord): Promise<void> {
    killCgroup(rec.ctrId);
    await this.o.podman.run(['rm', '--force', '--time', '0', containerName(rec.id)], { allowFail: true });
    if ((await this.o.podman.inspect(rec.id)) !== null) throw ERRORS.podmanCannotRemoveBroken();
    await this.create(rec);
  }

  /** `podman start`; a container podman cannot start (conmon was killed under it) is replaced once. */
  async start(rec: MachineRecord): Promise<void> {
    const r = await this.o.podman.run(['start', containerName(rec.id)], { allowFail: true });
    if (r.code === 0) return;
    this.o.warn?.(`container substrate: ${rec.id} could not be started (${r.stderr.trim().split('\n').pop() ?? ''}); replacing its container`);
    await this.recreate(rec);
    await this.o.podman.run(['start', containerName(rec.id)]);
  }
}
