/**
 * Metering: turns machine state intervals, held snapshots/templates and served bytes into usage records.
 *
 * Every metered subject has a cursor (`meter_cursors`): its usage is recorded up to that instant. Two
 * moments add the interval since the cursor and move it, always in ONE transaction (so a crash loses at
 * most the interval in flight and never counts one twice):
 *   - every machine state move (the store's move hook runs inside the compare-and-set's transaction, so
 *     the interval is priced in the state it was actually spent in);
 *   - `flush()`, every FLUSH_MS while the server runs (and once at a clean shutdown).
 * Egress is counted in memory by the gateway, previews and file downloads and recorded at each flush.
 * At start-up `resume()` moves every cursor to now: time the control plane was down is not metered.
 */
import { MachineState } from '../../../shared/schemas/machine.js';
import type { MachineSize } from '../../../shared/schemas/machine.js';
import { CATALOG, catalogAt, type CatalogVersion } from '../domain/catalog.js';
import { accrue, GIB, hourOf, machineRates, type Accrual } from '../domain/metering.js';
import type { Store } from '../store/store.js';
import type { ColdSubject, CursorKind } from '../store/repos/usage.js';
import type { MovedMachine } from '../store/repos/machines.js';

/** How often usage is recorded while machines run: the most a crash can lose. */
export const FLUSH_MS = 30_000;

/** Bytes served per machine since the last flush (the gateway's, previews' and file downloads' meter). */
export class EgressTally {
  private bytes = new Map<string, number>();
  /** Every byte counted since the process started (the operators' egress counter). */
  total = 0;
  add(machineId: string, n: number): void {
    if (n <= 0) return;
    this.total += n;
    this.bytes.set(machineId, (this.bytes.get(machineId) ?? 0) + n);
  }
  /** Bytes counted for the machine since the last take (without resetting). */
  peek(machineId: string): number {
    return this.bytes.get(machineId) ?? 0;
  }
  take(): Map<string, number> {
    const out = this.bytes;
    this.bytes = new Map();
    return out;
  }
}

export function createMeteringService(d: { store: Store; now: () => Date; catalog?: readonly CatalogVersion[] }) {
  const { store } = d;
  const catalog = d.catalog ?? CATALOG;
  const egress = new EgressTally();
  const flushListeners: Array<(orgIds: Set<string>) => Promise<void>> = [];
  let timer: NodeJS.Timeout | null = null;
  // Off in a process that does not lead the deployment: its flushes then record only the egress it served.
  let intervals = true;

  const diskBytes = (size: MachineSize, atMs: number) =>
    BigInt(catalogAt(new Date(atMs), catalog).sizes.find((s) => s.id === size)?.disk_gb ?? 0) * GIB;

  async function record(orgId: string, source: { source_id: string; machine_id: string | null; template_id: string | null }, acc: Accrual[], at: string): Promise<void> {
    for (const a of acc) {
      await store.usage.add({ org_id: orgId, ...source, meter: a.meter, size: a.size, hour: new Date(a.hour).toISOString(), quantity: a.quantity }, at);
    }
  }

  /**
   * Inside a transaction: claims the subject's interval from its cursor (or `start` when it has none) to `at` by a
   * compare-and-set on the cursor, so that of two processes metering the same subject at once (two flushes, an old
   * leader's and a new one's, or a flush and a state move) each instant is recorded by exactly one. A lost CAS means
   * another process recorded up to its own instant first: this one claims what is left after it. Null: nothing left
   * (the cursor is already at or past `at`, or it was dropped meanwhile: the subject was deleted and metered then).
   * `since` as a string: the start is known without a read (a move's RETURNING, a cold subject's row), so the first
   * try reads and moves the cursor in one statement (the store's `claimCursor`); a lost race tries again as below.
   */
  async function claim(id: string, kind: CursorKind, since: string | (() => Promise<string | null>), at: string): Promise<{ from: number; to: number } | null> {
    const to = Date.parse(at);
    let seen = false;
    if (typeof since === 'string' && Date.parse(since) < to) {
      const c = await store.usage.claimCursor(id, kind, at);
      if (c.moved) return { from: Date.parse(c.prev ?? since), to };
      if (c.prev !== null && Date.parse(c.prev) >= to) return null;
      seen = true;
    }
    const start = typeof since === 'string' ? async () => since : since;
    for (; ; seen = true) {
      const cursor = await store.usage.cursor(id);
      if (cursor === null && seen) return null;
      const begin = cursor ?? (await start());
      if (begin === null) return null;
      const from = Date.parse(begin);
      if (to <= from) return null;
      if (await store.usage.advanceCursor(id, kind, cursor, at)) return { from, to };
    }
  }

  /** Inside a transaction: the machine's usage from its cursor to `at`, spent in `state`. */
  async function meterMachine(m: MovedMachine, state: MachineState, at: string, by: 'move' | 'flush'): Promise<void> {
    // No cursor yet: from its creation. A flush skips a machine deleted meanwhile (its deletion metered it and dropped
    // the cursor); a move is that deletion, in its own transaction, and its RETURNING gave the creation instant.
    const created = by === 'move' ? m.created_at : async () => (await store.machines.byId(m.id))?.created_at ?? null;
    const span = await claim(m.id, 'machine', created, at);
    if (!span) return;
    await record(m.org_id, { source_id: m.id, machine_id: m.id, template_id: null }, accrue(machineRates(state, m.size, diskBytes(m.size, span.from)), span.from, span.to), at);
  }

  store.machines.onMove(async (m, from, to, at) => {
    await meterMachine(m, from, at, 'move');
    // A deleted machine accrues nothing more: its cursor goes.
    if (to === null) await store.usage.dropCursor(m.id);
  });

  /** Inside a transaction: a stored snapshot's or template's cold storage from its cursor to `at`. */
  async function meterCold(c: ColdSubject, at: string): Promise<void> {
    const span = await claim(c.id, c.kind, c.since, at);
    if (!span) return;
    const acc = accrue([{ meter: 'cold_storage_byte_seconds', size: null, rate: BigInt(c.size_bytes) }], span.from, span.to);
    const source = c.kind === 'snapshot'
      ? { source_id: c.machine_id!, machine_id: c.machine_id, template_id: null }
      : { source_id: c.id, machine_id: null, template_id: c.id };
    await record(c.org_id, source, acc, at);
  }

  // A snapshot or template removed between two flushes: its last interval is recorded with the removal.
  const removed = async (kind: 'snapshot' | 'template', id: string) => {
    const c = await store.usage.coldSubject(kind, id);
    if (c) await meterCold(c, d.now().toISOString());
    await store.usage.dropCursor(id);
  };
  store.snapshots.onRemove(removed);
  store.templates.onRemove(removed);

  /** Inside a transaction: every machine's and stored snapshot's or template's usage up to `at`. */
  async function meterIntervals(at: string, touched: Set<string>): Promise<void> {
    for (const m of await store.machines.inStates(MachineState.options)) {
      await meterMachine(m, m.state, at, 'flush');
      touched.add(m.org_id);
    }
    for (const c of await store.usage.coldSubjects()) {
      await meterCold(c, at);
      touched.add(c.org_id);
    }
    for (const o of await store.usage.orphanCursors()) await store.usage.dropCursor(o.source_id);
  }

  async function flush(opts: { notify?: boolean } = {}): Promise<Set<string>> {
    const at = d.now().toISOString();
    const served = egress.take();
    const touched = new Set<string>();
    try {
      await store.db.tx(async () => {
        if (intervals) await meterIntervals(at, touched);
        const hour = new Date(hourOf(Date.parse(at))).toISOString();
        for (const [machineId, bytes] of served) {
          const m = await store.machines.anyById(machineId);
          if (!m) continue;
          await store.usage.add({ org_id: m.org_id, source_id: m.id, machine_id: m.id, template_id: null, meter: 'egress_bytes', size: null, hour, quantity: BigInt(bytes) }, at);
          touched.add(m.org_id);
        }
      });
    } catch (e) {
      // Not recorded: keep the bytes for the next flush rather than dropping them.
      for (const [id, n] of served) egress.add(id, n);
      throw e;
    }
    if (opts.notify !== false) for (const l of flushListeners) await l(touched);
    return touched;
  }

  return {
    egress,
    flush,
    /** After a flush, with the organizations that accrued usage (trial limits are checked there). */
    onFlush(l: (orgIds: Set<string>) => Promise<void>): void {
      flushListeners.push(l);
    },
    /** Whether flushes meter intervals (the deployment leader's job) or only this process's egress. */
    meterIntervals(on: boolean): void {
      intervals = on;
    },
    /** Start-up: the downtime before `at` is not metered. */
    resume(at: Date = d.now()): Promise<void> {
      const iso = at.toISOString();
      return store.db.tx(async () => {
        await store.usage.resumeAll(iso);
        for (const m of await store.machines.inStates(MachineState.options)) if ((await store.usage.cursor(m.id)) === null) await store.usage.setCursor(m.id, 'machine', iso);
      });
    },
    start(intervalMs = FLUSH_MS, onError: (e: unknown) => void = () => {}): void {
      if (timer) return;
      timer = setInterval(() => void flush().catch(onError), intervalMs);
      timer.unref();
    },
    stop(): void {
      if (timer) clearInterval(timer);
      timer = null;
    },
  };
}
export type MeteringService = ReturnType<typeof createMeteringService>;
