/**
 * The warm pool: started-but-unassigned machines per size on this host, so a plain create takes one instead of
 * booting (docs/api-machines.md, "Warm starts"). Decisions are domain/warm-pool.ts's; this file acts on them.
 *
 * A member has no row: no organization's list, quota, usage or bill counts it. Its agent holds no key (nobody
 * enrolled it) and an identity (machine-id, hostname) of its own that the take replaces; the take records the tenant's row with the member's id and a fresh key in the create's own
 * transaction (create.ts), and the first agent call enrolls that key. Members are never given back: a machine
 * taken from the pool is destroyed at its delete like any other.
 *
 * Decide and record, act, record the outcome: a member is written to the ledger before it is made and dropped
 * once destroyed or taken; `reconcile` (at start, before the pool fills) destroys every ledger entry that has no
 * row and forgets the ones a row took. The pool's members use the host's capacity: they count when the pool
 * decides to fill (committed + pool + one more must fit the commit limits), never in a tenant's admission, and
 * the pool drains when tenants' machines and the pool together exceed the limits, or the disk is below its
 * reserve.
 */
import { newId } from '../../../../shared/ids.js';
import { MachineSize } from '../../../../shared/schemas/machine.js';
import { committedBy, decideCapacity } from '../../domain/capacity.js';
import { catalogAt } from '../../domain/catalog.js';
import { POOL_DEMAND_WINDOW_MS, poolLeftover, poolStep, poolTarget, type PoolHost } from '../../domain/warm-pool.js';
import { faultPoint } from '../../fault-points.js';
import { resourcesForSize } from '../../substrate/substrate.js';
import type { MachineCore } from './core.js';
import type { PoolEntry } from './pool-ledger.js';

export interface WarmPool {
  /** A ready member of `size`, removed from the pool's hands (sync: the caller's transaction records it), or null. */
  take(size: MachineSize): string | null;
  /** The create that took `id` was refused before it was recorded: the member is the pool's again. */
  giveBack(id: string, size: MachineSize): void;
  /** The create that took `id` committed its row: the ledger lets go of it, and the pool refills. */
  taken(id: string): void;
  /** A create of `size` happened (eligible or not): demand. */
  noteDemand(size: MachineSize): void;
  /** At start, before `start`: destroy what a previous run's pool left; forget what rows took. */
  reconcile(): Promise<void>;
  start(): void;
  /** Stop filling and destroy every member (shutdown). */
  drain(): Promise<void>;
  /** Ready members per size (tests, bench). */
  ready(): Record<string, string[]>;
  /** One pass now (tests; the timer does the same). */
  tick(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function createWarmPool(c: MachineCore): WarmPool {
  const { d } = c;
  const cfg = d.warmPool;
  const cap = cfg?.perSize ?? 0;
  const ledger = cfg?.ledger;
  const members = new Map<MachineSize, string[]>();
  const making = new Map<MachineSize, number>();
  const demand = new Map<MachineSize, number[]>();
  /** Members this process made and still holds (ready or being made): never a previous run's leftovers. */
  const mine = new Set<string>();
  let timer: ReturnType<typeof setInterval> | null = null;
  let running = false;
  let pass: Promise<void> = Promise.resolve();

  const readyOf = (size: MachineSize) => members.get(size) ?? members.set(size, []).get(size)!;
  const held = (size: MachineSize) => readyOf(size).length + (making.get(size) ?? 0);
  const sizes = () => catalogAt(d.now(), c.catalog).sizes;

  async function destroy(e: PoolEntry): Promise<void> {
    mine.delete(e.id);
    try {
      await d.locks.run(e.id, () => d.substrate.destroy(e.id));
      ledger?.remove(e.id);
    } catch (err) {
      // Kept in the ledger: the next start's reconcile destroys it.
      d.onFailure?.(e.id, 'pool_destroy', err);
    }
  }

  /** The agent listens on its channel (the image's init starts it after the desktop); nothing is enrolled. */
  async function listening(id: string): Promise<void> {
    const end = Date.now() + (cfg?.readyTimeoutMs ?? 120_000);
    for (;;) {
      try {
        (await d.substrate.openChannel(id)).destroy();
        return;
      } catch (e) {
        if (Date.now() > end) throw e;
      }
      await sleep(100);
    }
  }

  async function fill(size: MachineSize): Promise<void> {
    const e: PoolEntry = { id: newId('machine'), size };
    making.set(size, (making.get(size) ?? 0) + 1);
    mine.add(e.id);
    try {
      ledger!.add(e);
      faultPoint('pool.fill.before_substrate');
      try {
        const resources = resourcesForSize(size, sizes());
        await d.locks.run(e.id, () => d.substrate.create({ id: e.id, resources, source: { kind: 'base' }, network: d.network ?? 'none' }, { start: true }));
        await listening(e.id);
      } catch (err) {
        d.onFailure?.(e.id, 'pool_fill', err);
        await destroy(e);
        return;
      }
      if (running) {
        readyOf(size).push(e.id);
        faultPoint('pool.fill.ready');
      } else await destroy(e);
    } finally {
      making.set(size, (making.get(size) ?? 1) - 1);
    }
  }

  async function hostFor(size: MachineSize): Promise<PoolHost> {
    let diskLow = false;
    try {
      d.hostHealth?.checkReserve();
    } catch {
      diskLow = true;
    }
    if (!d.capacity) return { diskLow, roomForOne: true, overCommitted: false };
    const all = sizes();
    const tenants = committedBy(await d.store.machines.computeBySize(), all);
    const pool = committedBy([...members.keys()].map((s) => ({ size: s, n: held(s) })), all);
    const both = { vcpu: tenants.vcpu + pool.vcpu, memory_mb: tenants.memory_mb + pool.memory_mb };
    const { host, ratios } = d.capacity;
    return {
      diskLow,
      roomForOne: decideCapacity(host, ratios, both, resourcesForSize(size, all)).ok,
      overCommitted: !decideCapacity(host, ratios, tenants, pool).ok,
    };
  }

  async function once(): Promise<void> {
    if (!running || !ledger) return;
    const now = Date.now();
    for (const size of MachineSize.options) {
      const recent = (demand.get(size) ?? []).filter((t) => now - t < POOL_DEMAND_WINDOW_MS);
      demand.set(size, recent);
      // A member that died in the pool is never handed out.
      for (const id of [...readyOf(size)]) {
        if ((await d.substrate.liveness(id).catch(() => 'lost')) === 'running') continue;
        members.set(size, readyOf(size).filter((x) => x !== id));
        await destroy({ id, size });
      }
      const step = poolStep(poolTarget(recent.length, cap), held(size), await hostFor(size));
      if (step.do === 'fill') await fill(size);
      else if (step.do === 'drain') {
        for (const id of readyOf(size).splice(0, step.n)) await destroy({ id, size });
      }
    }
  }

  function tick(): Promise<void> {
    // One pass at a time: fills on this 2-core host are gentle, and a drain never races a fill.
    pass = pass.then(once).catch((e) => d.onFailure?.('*', 'pool_tick', e));
    return pass;
  }

  return {
    take(size) {
      if (!running) return null;
      return readyOf(size).shift() ?? null;
    },
    giveBack(id, size) {
      readyOf(size).unshift(id);
    },
    taken(id) {
      mine.delete(id);
      ledger?.remove(id);
      void tick();
    },
    noteDemand(size) {
      if (cap <= 0) return;
      (demand.get(size) ?? demand.set(size, []).get(size)!).push(Date.now());
      void tick();
    },
    async reconcile() {
      if (!ledger) return;
      for (const e of ledger.all()) {
        if (mine.has(e.id)) continue;
        if (poolLeftover((await d.store.machines.byId(e.id)) !== undefined) === 'forget') ledger.remove(e.id);
        else await destroy(e);
      }
    },
    start() {
      if (cap <= 0 || !ledger || running) return;
      running = true;
      timer = setInterval(() => void tick(), cfg?.tickMs ?? 2_000);
      timer.unref?.();
    },
    async drain() {
      running = false;
      if (timer) clearInterval(timer);
      timer = null;
      await pass;
      for (const [size, ids] of members) for (const id of ids.splice(0)) await destroy({ id, size });
    },
    ready: () => Object.fromEntries([...members].map(([s, ids]) => [s, [...ids]])),
    tick,
  };
}
