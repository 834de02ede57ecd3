/**
 * Freezing a running container for a live capture, and thawing it again: through its cgroup v1 freezer
 * directly (about a millisecond) when podman's cgroup is where cgroupfs puts it, else `podman pause`/`unpause`.
 * Decide and record, act, record the outcome: the freeze is written to the machine's record before it is made
 * and cleared only once the container is thawed, so a control plane killed in between leaves it in the record,
 * and the next one thaws it when it starts (thawLeftovers).
 */
import fs from 'node:fs';
import { ERRORS } from '../../errors.js';
import type { MachineRecords } from '../records.js';
import { freezerStatePath, liveCgroup } from './cgroup.js';
import type { Freeze, MachineRecord } from './machine-record.js';
import { containerName } from './podman-argv.js';
import type { Podman } from './podman.js';

export class Freezer {
  /** Machines this process is capturing live (frozen on purpose); any other frozen machine is a fault. */
  private readonly capturing = new Set<string>();

  constructor(
    private readonly podman: Podman,
    private readonly records: MachineRecords<MachineRecord>,
    private readonly warn?: (msg: string) => void,
  ) {}

  /** Whether this process froze the machine itself (a capture in flight). */
  isCapturing(id: string): boolean {
    return this.capturing.has(id);
  }

  /** Run `fn` with every process of the container (cgroup `cg`) frozen; thawed after, whatever `fn` did. */
  async whileFrozen<T>(rec: MachineRecord, cg: string, fn: () => Promise<T>): Promise<T> {
    this.capturing.add(rec.id);
    try {
      const thaw = await this.freeze(rec, cg);
      try {
        return await fn();
      } finally {
        await thaw();
      }
    } finally {
      this.capturing.delete(rec.id);
    }
  }

  /** Freeze every process of the container; returns the thaw. */
  private async freeze(rec: MachineRecord, cg: string): Promise<() => Promise<void>> {
    const state = freezerStatePath(cg);
    const how: Freeze = state && fs.existsSync(state) ? { how: 'cgroup', cgroup: cg } : { how: 'podman' };
    this.records.write({ ...this.records.read(rec.id), frozen: how });
    const thaw = () => this.thawAs(rec.id, how);
    try {
      if (how.how === 'podman') await this.podman.run(['pause', containerName(rec.id)]);
      else {
        fs.writeFileSync(state, 'FROZEN');
        const end = Date.now() + 5000;
        while (fs.readFileSync(state, 'utf8').trim() !== 'FROZEN') {
          if (Date.now() > end) throw ERRORS.containerNotFrozen();
          await new Promise((res) => setTimeout(res, 1));
        }
      }
    } catch (e) {
      await thaw();
      throw e;
    }
    return thaw;
  }

  /** Thaw a container frozen `how`, then clear the freeze from its record (kept if the thaw failed). */
  private async thawAs(id: string, how: Freeze): Promise<void> {
    if (how.how === 'podman') {
      const r = await this.podman.run(['unpause', containerName(id)], { allowFail: true });
      // Not paused (any more) is thawed; anything else is kept for the watch to try again.
      if (r.code !== 0 && (await this.podman.state(id)) === 'paused') throw ERRORS.podmanCannotUnpause();
    } else {
      const state = freezerStatePath(how.cgroup);
      // A cgroup that is gone (the container stopped meanwhile) has nothing left to thaw.
      if (state && fs.existsSync(state)) fs.writeFileSync(state, 'THAWED');
    }
    const now = this.records.read(id);
    if (now.frozen) {
      delete now.frozen;
      this.records.write(now);
    }
  }

  /**
   * Thaw a running machine the watch found frozen with no capture of this process in flight (liveness
   * `frozen`): what a killed control plane left, or a freeze made from outside. Undone where liveness saw it:
   * the cgroup's freezer when it could read it, else podman's pause.
   */
  async thaw(rec: MachineRecord): Promise<void> {
    const cg = liveCgroup(rec.ctrId);
    await this.thawAs(rec.id, cg ? { how: 'cgroup', cgroup: cg } : { how: 'podman' });
  }

  /**
   * Containers a control plane killed inside a live capture left frozen (their records say so): thawed before
   * anything else, so a running machine answers again as soon as the control plane is back. A cgroup freeze is
   * undone synchronously, within the call; only the `podman unpause` fallback runs after it.
   */
  async thawLeftovers(): Promise<void> {
    for (const id of this.records.entries()) {
      let rec: MachineRecord;
      try {
        rec = this.records.read(id);
      } catch {
        continue;
      }
      if (!rec.frozen) continue;
      this.warn?.(`container substrate: ${id} was left frozen by a capture the control plane did not finish; thawing it`);
      try {
        await this.thawAs(id, rec.frozen);
      } catch (e) {
        // The substrate watch finds it frozen and tries again.
        this.warn?.(`container substrate: ${id} could not be thawed (${(e as Error).message})`);
      }
    }
  }
}
