/**
 * One host's side of a drain's move (issue 25 item 6; docs/operations.md "Draining a host"): the acts the move host
 * routes (internal-moves.ts) run on this host's substrate, and that the drain's seam (cluster/machine-move.ts) calls
 * directly when this process drives the host itself. Each is idempotent: the drain acts a step again when a leader
 * died between its begun and done records, so a second call finds the work done and changes nothing.
 *
 * | act       | where  | done already when                                   | else                                     |
 * |-----------|--------|-----------------------------------------------------|------------------------------------------|
 * | stop      | source | the guest is not running                            | stopped under the disk lock, disk kept   |
 * | capture   | source | a layer here is pinned by this move's holder: it    | captured in place, pinned by the holder  |
 * | pull      | target | the chain is here (0 bytes; the holder's pin added) | the services' puller brings it           |
 * | makeDisk  | target | the substrate holds the machine                     | made from the chain, not started         |
 * | start     | target | the guest runs (and its agent answers)              | started, then its agent waited for       |
 * | forkCapture | a live fork's parent's host | a layer here is pinned by the fork's holder | captured in place, pinned (live-fork.ts) |
 * | forkRelease | the same                    | no pin of the fork's holder is here          | its pins released                         |
 *
 * The move's holder (`moveHolder`: the machine and the move's plan seq) pins the captured layer on the source and the pulled chain on the target until the
 * move is finished; the snapshot service's pin sweep never releases it (not a snapshot's, template's or machine's
 * id): move-sweep.ts does, once no move of the machine is open. The source acts refuse a machine not recorded on
 * this host; a pull onto a host still holding a disk of the machine from an earlier move away (not swept yet) destroys
 * that stale disk first (the row says the machine lives elsewhere and this move is open to here), so `makeDisk`'s
 * "already made" is always this move's disk.
 *
 * A start is a boot like any other once the drain records the machine `running` (just after this act answers): the
 * boot path (`booted`: the machines' boot listeners, which deliver its secrets into the fresh tmpfs, and its ready
 * probe) runs then, once per boot, from a bounded watch of the row here (`AFTER_START`).
 */
import { agentOf } from './machine-agent/index.js';
import type { MachineAgent } from './machine-agent/index.js';
import { catalogAt, CATALOG, type CatalogVersion } from '../domain/catalog.js';
import { ERRORS } from '../errors.js';
import type { MachineRow } from '../store/repos/machines.js';
import type { Store } from '../store/store.js';
import { resourcesForSize, type Substrate } from '../substrate/substrate.js';
import type { DiskLocks } from './disk-locks.js';
import type { HeldLayer, PullOutcome } from './layer-pull.js';
import { forkHolder, forkPinKept } from './live-fork.js';

/**
 * The pin holder naming one move of machine `machineId` (`move`: its plan's record seq), on the source's capture and
 * the target's pulled chain: a pin an earlier move of the machine left on a host (not swept yet) is never taken for
 * this move's.
 */
export const moveHolder = (machineId: string, move: number): string => `move_${machineId}_${move}`;
/** The machine and move a move holder names, or null for any other holder. */
export function movedMachineOf(holder: string): { machine: string; move: number } | null {
  const m = /^move_(mch_[0-9a-z]{20,32})_([0-9]{1,15})$/.exec(holder);
  return m ? { machine: m[1]!, move: Number(m[2]) } : null;
}

export interface MoveActsDeps {
  store: Pick<Store, 'machines'>;
  substrate: Pick<Substrate, 'status' | 'stop' | 'start' | 'create' | 'capture' | 'layerPins' | 'releaseLayer' | 'destroy'>;
  locks: DiskLocks;
  /** This process's host (null: no registry; nothing is on this host by its row, so no source act runs). */
  hostId: string | null;
  /** The services' layer puller (snapshots.bring): brings a layer from another host, pinned by the holder. */
  bring(held: HeldLayer, holder: string): Promise<PullOutcome>;
  agent: Pick<MachineAgent, 'call' | 'drop'>;
  /** How long a started guest's agent is waited for (the machines' ready probe); false: not waited for. */
  readyProbe: { intervalMs: number; timeoutMs: number } | false;
  network: 'outbound' | 'none';
  now: () => Date;
  catalog?: readonly CatalogVersion[];
  /** The machines' boot path (ready.ts `watchReady`), run once the moved machine is recorded running here. */
  booted?: (m: MachineRow) => void;
}

/** How long, and how often, a started machine's row is read until the drain records it running here. */
export const AFTER_START = { withinMs: 60_000, everyMs: 250 } as const;

export function createMoveActs(d: MoveActsDeps) {
  const { substrate, locks } = d;
  const probe = d.readyProbe;
  /** Per machine: the boot (its state_changed_at) the boot path ran for, and the watch still waiting for one. */
  const bootedAt = new Map<string, string>();
  const watching = new Map<string, Promise<void>>();

  /** Runs the boot path once the row says the machine runs here, at most once per boot; gives up when it moves on. */
  async function watchBoot(id: string): Promise<void> {
    const deadline = Date.now() + AFTER_START.withinMs;
    for (;;) {
      const m = await d.store.machines.byId(id);
      if (!m || m.host_id !== d.hostId) return;
      if (m.state === 'running') {
        if (bootedAt.get(id) !== m.state_changed_at) {
          bootedAt.set(id, m.state_changed_at);
          d.booted?.(m);
        }
        return;
      }
      if (m.state !== 'starting' || Date.now() > deadline) return;
      await new Promise((r) => setTimeout(r, AFTER_START.everyMs));
    }
  }

  async function row(id: string): Promise<MachineRow> {
    const m = await d.store.machines.byId(id);
    if (!m) throw ERRORS.moveNoSuchMachine();
    return m;
  }

  /** The source's acts only touch a machine recorded on this host. */
  async function onThisHost(id: string): Promise<MachineRow> {
    const m = await row(id);
    if (d.hostId === null || m.host_id !== d.hostId) throw ERRORS.moveNotOnThisHost();
    return m;
  }

  /** `id`'s disk captured in place under its disk lock, pinned by `holder`; the layer `holder` already pins if any. */
  function captureHeld(id: string, holder: string): Promise<{ chain: string }> {
    return locks.run(id, async () => {
      const pinned = (await substrate.layerPins()).find((p) => p.holder === holder);
      if (pinned) return { chain: pinned.layerId };
      return { chain: (await substrate.capture(id, holder)).layerId };
    });
  }

  /** Waits until the started guest's agent answers (any answer), within the probe's bound. */
  async function answering(m: MachineRow): Promise<void> {
    if (!probe) return;
    const deadline = Date.now() + probe.timeoutMs;
    for (;;) {
      try {
        await d.agent.call(agentOf(m), 'display.get', { timeoutMs: Math.max(probe.intervalMs, 2_000) });
        return;
      } catch {
        if (Date.now() > deadline) throw ERRORS.moveAgentSilent();
      }
      await new Promise((r) => setTimeout(r, probe.intervalMs));
    }
  }

  return {
    async stop(id: string): Promise<void> {
      await onThisHost(id);
      d.agent.drop(id);
      await locks.run(id, async () => {
        if ((await substrate.status(id)) === 'running') await substrate.stop(id);
      });
      d.agent.drop(id);
    },

    async capture(id: string, move: number): Promise<{ chain: string }> {
      await onThisHost(id);
      return captureHeld(id, moveHolder(id, move));
    },

    /** A live fork's capture of `parent` here, for fork `fork` (being made on another host): see live-fork.ts. */
    async forkCapture(parent: string, fork: string): Promise<{ chain: string }> {
      await onThisHost(parent);
      // Only for a fork still being made: a pin for any other would wait for the sweep for nothing.
      if (!forkPinKept((await d.store.machines.byId(fork))?.state)) throw ERRORS.forkNotBeingMade();
      return captureHeld(parent, forkHolder(fork));
    },

    /** Lets go of fork `fork`'s capture pin here, if any (the fork's disk is made, or it failed). */
    async forkRelease(fork: string): Promise<void> {
      const holder = forkHolder(fork);
      for (const p of (await substrate.layerPins()).filter((x) => x.holder === holder)) await substrate.releaseLayer(p.layerId, holder);
    },

    async pull(id: string, move: number, from: string, chain: string): Promise<{ bytes: number }> {
      const m = await row(id);
      if (m.host_id !== d.hostId) {
        // A disk of this machine still here is an earlier move's leftover (see the header): not this move's.
        await locks.run(id, async () => {
          if ((await substrate.status(id)) !== 'absent') await substrate.destroy(id);
        });
      }
      const got = await d.bring({ layerId: chain, hostId: from }, moveHolder(id, move));
      return { bytes: got.kind === 'pulled' ? got.bytes : 0 };
    },

    async makeDisk(id: string, chain: string): Promise<void> {
      const m = await row(id);
      const resources = resourcesForSize(m.size, catalogAt(d.now(), d.catalog ?? CATALOG).sizes);
      await locks.run(id, async () => {
        if ((await substrate.status(id)) !== 'absent') return;
        await substrate.create({ id, resources, source: { kind: 'layer', layerId: chain }, network: d.network }, { start: false });
      });
    },

    async start(id: string): Promise<void> {
      const m = await row(id);
      await locks.run(id, async () => {
        const status = await substrate.status(id);
        if (status === 'absent') throw ERRORS.moveNoDiskHere();
        if (status !== 'running') await substrate.start(id);
      });
      await answering(m);
      if (!watching.has(id)) {
        const w = watchBoot(id).catch(() => {}).finally(() => watching.delete(id));
        watching.set(id, w);
      }
    },

    /** Resolves once the boot watch of a start of `id` is over (tests and shutdown wait on it). */
    booting: (id: string): Promise<void> => watching.get(id) ?? Promise.resolve(),
  };
}

export type MoveActs = ReturnType<typeof createMoveActs>;
