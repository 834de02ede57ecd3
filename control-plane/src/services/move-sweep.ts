/**
 * What a finished move leaves on a host (issue 25 item 6; docs/operations.md "Draining a host"): the source keeps
 * the machine's old disk and the capture's pin, a target the move gave up on keeps the pulled chain's pin and maybe a
 * disk made from it. Every such host holds a pin of the move's holder (services/move-acts.ts `moveHolder`), so the
 * sweep starts from those pins. For each machine a move holder names, in order:
 *
 * | a move of the machine | its row                                  | here                                         |
 * |-----------------------|------------------------------------------|----------------------------------------------|
 * | open                  | any                                      | nothing: the move still needs what is here   |
 * | none open             | on another host (live or deleted there)  | its disk destroyed, then the pin released    |
 * | none open             | on this host, or no row                  | the pin released (the disk here is its own)  |
 *
 * The disk goes before the pin, so a sweep cut short leaves the pin that brings it back to the disk. Run by the
 * host's reconcile (services/machines/reconcile.ts) and with the host driver's pin sweep (cluster/substrate-job.ts).
 */
import { openMove } from '../domain/drain.js';
import type { Store } from '../store/store.js';
import type { Substrate } from '../substrate/substrate.js';
import type { DiskLocks } from './disk-locks.js';
import { movedMachineOf } from './move-acts.js';

export interface MoveSweepDeps {
  store: Pick<Store, 'machines' | 'drain'>;
  substrate: Pick<Substrate, 'layerPins' | 'releaseLayer' | 'status' | 'destroy'>;
  locks: DiskLocks;
  /** This process's host (null: no registry, so nothing ever moved). */
  hostId: string | null;
  onFailure?: (id: string, op: string, cause: unknown) => void;
}

export interface MoveSweepResult {
  /** Machines whose disk left behind here was destroyed. */
  destroyed: string[];
  /** Move pins released. */
  released: number;
}

export function createMoveSweep(d: MoveSweepDeps) {
  return async function sweepMoves(): Promise<MoveSweepResult> {
    const out: MoveSweepResult = { destroyed: [], released: 0 };
    if (d.hostId === null) return out;
    const open = async (id: string) => openMove(await d.store.drain.records(id)) !== null;
    for (const pin of await d.substrate.layerPins()) {
      const id = movedMachineOf(pin.holder)?.machine ?? null;
      if (id === null || (await open(id))) continue;
      try {
        // Under the disk lock, read again: a move planned since (back to this host) keeps everything here.
        const done = await d.locks.run(id, async () => {
          if (await open(id)) return 'open';
          const row = await d.store.machines.anyById(id);
          if (!row || row.host_id === null || row.host_id === d.hostId || (await d.substrate.status(id)) === 'absent') return 'kept';
          await d.substrate.destroy(id);
          return 'destroyed';
        });
        if (done === 'open') continue;
        if (done === 'destroyed') out.destroyed.push(id);
        await d.substrate.releaseLayer(pin.layerId, pin.holder);
        out.released++;
      } catch (e) {
        d.onFailure?.(id, 'move_sweep', e);
      }
    }
    return out;
  };
}

export type MoveSweep = ReturnType<typeof createMoveSweep>;
