/**
 * The input lease: decisions are domain/lease.ts; this records them (compare-and-set on the fence that
 * was read, inside one transaction) and says who took or lost control in the event log.
 */
import type { LeaseRequest } from '../../../shared/schemas/machine.js';
import type { OrgPrincipal, Principal } from '../context.js';
import { checkInput, decideAcquire, decideRelease, isHeld, type LeaseRow } from '../domain/lease.js';
import type { MachineRow, SessionRow } from '../store/repos/machines.js';
import type { Store } from '../store/store.js';
import { actorOf } from './actor.js';
import type { Actor, EventService } from './events.js';
import { ERRORS } from '../errors.js';

/** A watched lease is re-read at least this often, so an expiry (even after a shortening renewal) is seen within it. */
const WATCH_RECHECK_MS = 1_000;
/** Reads of the lease a release makes before it gives up on a lease that keeps changing under it. */
const RELEASE_TRIES = 3;

export interface LeaseView {
  machine_id: string;
  held: boolean;
  session_id: string | null;
  fence: number;
  expires_at: string | null;
  holder: { session_id: string; type: string; opener: { type: string; id: string } } | null;
}

export interface Grant {
  machine_id: string;
  session_id: string;
  fence: number;
  expires_at: string;
  renewed: boolean;
}

export function openerOf(s: SessionRow): { type: 'user' | 'api_key'; id: string } {
  return { type: s.opener_kind, id: s.opener_id };
}

/** A session may be used for control only by whoever opened it (the same user, or the same key). */
export function ownsSession(p: Principal, s: SessionRow): boolean {
  const a = actorOf(p);
  return s.opener_kind === a.type && s.opener_id === a.id;
}

export function createLeaseService(d: { store: Store; events: EventService; now: () => Date }) {
  const { store, events } = d;
  const iso = (ms: number) => new Date(ms).toISOString();

  async function machineOf(orgId: string, machineId: string): Promise<MachineRow> {
    const m = await store.machines.inOrg(orgId, machineId);
    if (!m) throw ERRORS.noSuchMachine();
    return m;
  }

  /** The caller's own, open session on this machine, or the reason it cannot be used. */
  async function usableSession(p: OrgPrincipal, machineId: string, sessionId: string, field: string): Promise<SessionRow> {
    const s = await store.sessions.inOrg(p.org_id, sessionId);
    if (!s) throw ERRORS.noSuchSession([{ field, message: 'no such session' }]);
    if (s.machine_id !== machineId) throw ERRORS.sessionOnAnotherMachine([{ field, message: 'session of another machine' }]);
    if (s.state === 'closed') throw ERRORS.sessionClosed();
    if (!ownsSession(p, s)) throw ERRORS.sessionOfAnotherCaller();
    if (s.type === 'view') throw ERRORS.viewSessionNoInput();
    return s;
  }

  async function holderView(row: LeaseRow | null, nowMs: number): Promise<LeaseView['holder']> {
    if (!isHeld(row, nowMs)) return null;
    const s = await store.sessions.byId(row.session_id);
    return s ? { session_id: s.id, type: s.type, opener: openerOf(s) } : null;
  }

  function heldMessage(row: LeaseRow & { session_id: string }): string {
    return `The input lease is held by session ${row.session_id} (fence ${row.fence}) until ${iso(row.expires_at)}.`;
  }

  /**
   * Inside a transaction: end the lease `row` (the one read), recording why; false when the compare-and-set lost
   * (another process changed the lease between the read and this write: PostgreSQL, READ COMMITTED).
   */
  async function endLease(orgId: string, machineId: string, row: LeaseRow & { session_id: string }, reason: string, by: Actor): Promise<boolean> {
    const nowMs = d.now().getTime();
    const wasHeld = isHeld(row, nowMs);
    if (!(await store.leases.put(machineId, row, { session_id: null, fence: row.fence, expires_at: nowMs }, d.now().toISOString()))) return false;
    await events.append(orgId, machineId, 'session.control_released', {
      session_id: row.session_id, fence: row.fence, reason: wasHeld ? reason : 'expired', by,
    });
    return true;
  }

  /**
   * Reads the lease and applies `step` to it until its compare-and-set holds (each read in READ COMMITTED sees what
   * the winner committed, so the decision is made again on the lease as it is now). A lease changed on every one of
   * RELEASE_TRIES reads answers 409 (retry) rather than reporting a release that did not happen.
   */
  async function untilSet(machineId: string, step: (row: LeaseRow | null) => Promise<boolean>): Promise<void> {
    for (let i = 0; i < RELEASE_TRIES; i++) {
      if (await step(await store.leases.get(machineId))) return;
    }
    throw ERRORS.leaseChangedWhileReleasing();
  }

  return {
    acquire(p: OrgPrincipal, machineId: string, req: LeaseRequest): Promise<Grant> {
      return store.db.tx(async () => {
        const m = await machineOf(p.org_id, machineId);
        if (m.state !== 'running') throw ERRORS.leaseNeedsRunningMachine(m.state);
        const session = await usableSession(p, machineId, req.session_id, 'session_id');
        const nowMs = d.now().getTime();
        const at = d.now().toISOString();
        const row = await store.leases.get(machineId);
        const dec = decideAcquire(row, { session_id: session.id, ttl_seconds: req.ttl_seconds, force: req.force, now: nowMs });
        if (dec.kind === 'conflict') {
          throw ERRORS.leaseHeld(heldMessage({ machine_id: machineId, session_id: dec.holder, fence: dec.fence, expires_at: dec.expires_at }), [{ field: 'session_id', message: `lease held by ${dec.holder}` }]);
        }
        if (!(await store.leases.put(machineId, row, dec.lease, at))) throw ERRORS.leaseChangedWhileAcquiring();
        const by = actorOf(p);
        if (dec.kind === 'granted') {
          if (row && row.session_id !== null && row.session_id !== dec.revoked) {
            // The previous holder's lease ran out before this grant: say so, once.
            await events.append(p.org_id, machineId, 'session.control_released', { session_id: row.session_id, fence: row.fence, reason: 'expired', by: { type: 'system', id: null } });
          }
          if (dec.revoked) {
            await events.append(p.org_id, machineId, 'session.control_released', { session_id: dec.revoked, fence: row!.fence, reason: 'revoked', by });
          }
          await events.append(p.org_id, machineId, 'session.control_acquired', {
            session_id: session.id, session_type: session.type, fence: dec.lease.fence, forced: dec.revoked !== null, opener: openerOf(session), by,
          });
        }
        return { machine_id: machineId, session_id: session.id, fence: dec.lease.fence, expires_at: iso(dec.lease.expires_at), renewed: dec.renewed };
      });
    },

    async get(orgId: string, machineId: string): Promise<LeaseView> {
      await machineOf(orgId, machineId);
      const nowMs = d.now().getTime();
      const row = await store.leases.get(machineId);
      const held = isHeld(row, nowMs);
      return {
        machine_id: machineId,
        held,
        session_id: held ? row.session_id : null,
        fence: row?.fence ?? 0,
        expires_at: held ? iso(row.expires_at) : null,
        holder: await holderView(row, nowMs),
      };
    },

    /** Release by the holder (`sessionId` given) or by any controller of the machine (null). */
    release(p: OrgPrincipal, machineId: string, sessionId: string | null): Promise<void> {
      return store.db.tx(async () => {
        await machineOf(p.org_id, machineId);
        await untilSet(machineId, async (row) => {
          const dec = decideRelease(row, sessionId, d.now().getTime());
          if (dec.kind === 'not_holder') throw ERRORS.leaseHeldByOther(dec.holder, sessionId);
          return dec.kind === 'not_held' || (await endLease(p.org_id, machineId, dec.lease, 'released', actorOf(p)));
        });
      });
    },

    /** Inside a transaction (stop, delete, session close): end the lease if `sessionId` (or anyone) holds it. */
    async releaseInTx(orgId: string, machineId: string, reason: string, by: Actor, sessionId: string | null = null): Promise<void> {
      await untilSet(machineId, async (row) => {
        if (!row || row.session_id === null || (sessionId !== null && row.session_id !== sessionId)) return true;
        return endLease(orgId, machineId, { ...row, session_id: row.session_id }, reason, by);
      });
    },

    /**
     * For the gateway's input channel handshake: may `p` use `sessionId` for input on this machine at
     * all (its own, open, non-view session of this machine)? Holding the lease is not required yet.
     */
    async checkSession(p: OrgPrincipal, machineId: string, sessionId: string): Promise<void> {
      await machineOf(p.org_id, machineId);
      await usableSession(p, machineId, sessionId, 'session_id');
    },

    /** Per input message: does `sessionId` hold the lease with exactly this fence now? */
    async checkFence(_p: OrgPrincipal, machineId: string, sessionId: string, fence: number): Promise<{ ok: true } | { ok: false; current: number | null }> {
      const row = await store.leases.get(machineId);
      const r = checkInput(row, sessionId, fence, d.now().getTime());
      return r.ok ? { ok: true } : { ok: false, current: isHeld(row, d.now().getTime()) ? row!.fence : null };
    },

    /**
     * Calls `onReleased(sessionId, fence)` whenever a session stops holding the machine's lease grant `fence`: release,
     * takeover, session close, stop or delete (from the event log), and expiry (a timer at expires_at).
     * Returns the unsubscribe function.
     */
    watch(machineId: string, onReleased: (sessionId: string, fence: number) => void): () => void {
      let timer: NodeJS.Timeout | null = null;
      let closed = false;
      // Each arm reads the lease asynchronously: only the latest one may set the timer.
      let generation = 0;
      const told = new Set<string>();
      const tell = (sid: string, fence: number) => {
        const k = `${sid}:${fence}`;
        if (closed || told.has(k)) return;
        told.add(k);
        onReleased(sid, fence);
      };
      const arm = async (): Promise<void> => {
        if (timer) clearTimeout(timer);
        timer = null;
        const mine = ++generation;
        const row = await store.leases.get(machineId);
        if (closed || mine !== generation || !isHeld(row, d.now().getTime())) return;
        const held = { session_id: row.session_id, fence: row.fence };
        // A renewal records no event and may shorten the lease: look again at least every WATCH_RECHECK_MS.
        const delay = Math.min(WATCH_RECHECK_MS, Math.max(1, row.expires_at - d.now().getTime() + 1));
        timer = setTimeout(() => void recheck(held).catch(() => undefined /* store closed: nothing to watch any more */), delay);
        timer.unref?.();
      };
      const recheck = async (held: { session_id: string; fence: number }) => {
        const now = await store.leases.get(machineId);
        if (!isHeld(now, d.now().getTime()) || now.session_id !== held.session_id || now.fence !== held.fence) tell(held.session_id, held.fence);
        else await arm();
      };
      const rearm = () => void arm().catch(() => undefined /* store closed */);
      const unsub = events.subscribe(machineId, null, ({ event }) => {
        const data = event.data as { session_id?: unknown; fence?: unknown };
        if (event.type === 'session.control_released' && typeof data.session_id === 'string') tell(data.session_id, Number(data.fence));
        if (event.type === 'session.control_acquired' || event.type === 'session.control_released') rearm();
      });
      rearm();
      return () => {
        closed = true;
        if (timer) clearTimeout(timer);
        unsub();
      };
    },

    /** Is any lease in force on the machine (restore refuses while one is)? */
    async isHeld(machineId: string): Promise<boolean> {
      return isHeld(await store.leases.get(machineId), d.now().getTime());
    },

    /**
     * Security gate for input routes: the caller's own session named in X-Session-Id must hold the
     * lease, and a given X-Lease-Fence must be the current fence.
     */
    async checkInput(p: OrgPrincipal, machineId: string, sessionHeader: string | undefined, fenceHeader: string | undefined): Promise<{ session_id: string; fence: number }> {
      if (!sessionHeader) {
        throw ERRORS.inputNeedsSessionHeader([{ field: 'x-session-id', message: 'required' }]);
      }
      let fence: number | null = null;
      if (fenceHeader !== undefined) {
        if (!/^\d{1,15}$/.test(fenceHeader)) throw ERRORS.badLeaseFence([{ field: 'x-lease-fence', message: 'must be an integer' }]);
        fence = Number(fenceHeader);
      }
      const session = await usableSession(p, machineId, sessionHeader, 'x-session-id');
      const row = await store.leases.get(machineId);
      const r = checkInput(row, session.id, fence, d.now().getTime());
      if (r.ok) return { session_id: session.id, fence: r.fence };
      if (r.reason === 'no_lease') throw ERRORS.noLeaseHolder();
      if (r.reason === 'not_holder') throw ERRORS.leaseHeld(heldMessage(row as LeaseRow & { session_id: string }));
      throw ERRORS.staleFence(fence, r.fence);
    },
  };
}
export type LeaseService = ReturnType<typeof createLeaseService>;
