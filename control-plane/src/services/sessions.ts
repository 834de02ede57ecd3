/**
 * Sessions: who is working on a machine (an agent, a person, a viewer). Opening one is not control
 * (the spec gives it to the `sessions:write` scope, which grants no permission); sending input needs
 * the input lease on top.
 */
import { newId } from '../../../shared/ids.js';
import type { Page } from '../../../shared/schemas/pagination.js';
import type { CreateSessionRequest, SessionListQuery } from '../../../shared/schemas/session.js';
import type { OrgPrincipal } from '../context.js';
import { pageOf } from '../store/pagination.js';
import type { SessionRow, SessionState } from '../store/repos/machines.js';
import type { Store } from '../store/store.js';
import { actorOf } from './actor.js';
import type { EventService } from './events.js';
import type { LeaseService } from './leases.js';
import { openerOf } from './leases.js';
import type { QuotaService } from './quotas.js';
import { ERRORS } from '../errors.js';

export interface SessionView {
  id: string;
  machine_id: string;
  type: string;
  state: string;
  opener: { type: 'user' | 'api_key'; id: string };
  created_at: string;
  closed_at: string | null;
}

export function sessionView(s: SessionRow): SessionView {
  return { id: s.id, machine_id: s.machine_id, type: s.type, state: s.state, opener: openerOf(s), created_at: s.created_at, closed_at: s.closed_at };
}

/**
 * Security gate: an API key opens and closes sessions only with the `sessions:write` scope. People
 * need only membership (reads and session work are gated by membership).
 */
export function requireSessionsWrite(p: OrgPrincipal): void {
  if (p.kind === 'api_key' && !(p.scopes ?? []).includes('sessions:write')) {
    throw ERRORS.needsSessionsWriteKey();
  }
}

/**
 * A session no client has been attached to for IDLE_AFTER_MS becomes `idle`; one unattached for
 * EXPIRE_AFTER_MS is closed (reason `expired`), which releases its lease and stops it counting against
 * `concurrent_sessions`. "Attached": a gateway channel opened with its `session_id`, or its input lease
 * live (REST agents hold the lease while they drive the machine). docs/api-machines.md, "Sessions".
 */
export const IDLE_AFTER_MS = 5 * 60_000;
export const EXPIRE_AFTER_MS = 60 * 60_000;
/** How often the server sweeps (main.ts). */
export const SESSION_SWEEP_MS = 30_000;

export function createSessionService(d: { store: Store; events: EventService; leases: LeaseService; quotas: QuotaService; now: () => Date }) {
  const { store, events, leases } = d;
  /** Gateway sockets per session, in this process (sockets never survive a restart). */
  const attached = new Map<string, number>();

  /** The opener is the caller's user: the user itself, or an API key that user created in this organization. */
  async function openedBySameUser(p: OrgPrincipal, s: SessionRow): Promise<boolean> {
    if (s.opener_kind === 'user') return s.opener_id === p.user_id;
    return (await store.access.apiKeyCreator(s.org_id, s.opener_id)) === p.user_id;
  }
  return {
    open(p: OrgPrincipal, req: CreateSessionRequest): Promise<SessionView> {
      requireSessionsWrite(p);
      return store.db.tx(async () => {
        const m = await store.machines.inOrg(p.org_id, req.machine_id);
        if (!m) throw ERRORS.noSuchMachine([{ field: 'machine_id', message: 'no such machine' }]);
        if (m.state === 'deleting') throw ERRORS.machineBeingDeleted();
        await d.quotas.check(p.org_id, 'concurrent_sessions');
        const a = actorOf(p);
        const row: SessionRow = {
          id: newId('session'), org_id: p.org_id, machine_id: m.id, type: req.type, state: 'active',
          opener_kind: a.type, opener_id: a.id, created_at: d.now().toISOString(), closed_at: null,
        };
        await store.sessions.insert(row);
        await events.append(p.org_id, m.id, 'session.connected', { session_id: row.id, session_type: row.type, opener: openerOf(row) });
        return sessionView(row);
      });
    },

    async get(orgId: string, id: string): Promise<SessionView> {
      const s = await store.sessions.inOrg(orgId, id);
      if (!s) throw ERRORS.noSuchSession();
      return sessionView(s);
    },

    list(orgId: string, q: SessionListQuery): Promise<Page<SessionView>> {
      return pageOf(q, (after, limit) => store.sessions.page(orgId, after, limit, { machine_id: q.machine_id ?? null, state: (q.state ?? null) as SessionState | null }), sessionView);
    },

    /** Closing releases the session's input lease. Closing a closed session is a no-op. */
    close(p: OrgPrincipal, id: string): Promise<void> {
      requireSessionsWrite(p);
      return store.db.tx(async () => {
        const s = await store.sessions.inOrg(p.org_id, id);
        if (!s) throw ERRORS.noSuchSession();
        // Security gate: closing ends someone's work (and their input lease). A member closes only sessions
        // opened by themselves or their own API keys; admins and owners (members:manage) close any.
        if (!(await openedBySameUser(p, s)) && !p.permissions.has('members:manage')) {
          throw ERRORS.onlyOpenerClosesSession();
        }
        if (!(await store.sessions.close(id, d.now().toISOString()))) return;
        const by = actorOf(p);
        await leases.releaseInTx(s.org_id, s.machine_id, 'session_closed', by, s.id);
        await events.append(s.org_id, s.machine_id, 'session.disconnected', { session_id: s.id, reason: 'closed', by });
      });
    },

    /** Inside a transaction: close every open session of a machine that is going away. */
    async closeAllInTx(orgId: string, machineId: string, reason: string): Promise<void> {
      for (const s of await store.sessions.openOnMachine(machineId)) {
        if (await store.sessions.close(s.id, d.now().toISOString())) {
          await events.append(orgId, machineId, 'session.disconnected', { session_id: s.id, reason, by: { type: 'system', id: null } });
        }
      }
    },

    /**
     * For the gateway's handshake: the caller's own open session on this machine. Security gate: attaching
     * keeps a session alive, so only its opener (the same user or their keys) may name it.
     */
    async checkAttach(p: OrgPrincipal, machineId: string, id: string): Promise<void> {
      const s = await store.sessions.inOrg(p.org_id, id);
      if (!s || s.machine_id !== machineId) throw ERRORS.noSuchSessionOnMachine([{ field: 'session_id', message: 'no such session' }]);
      if (s.state === 'closed') throw ERRORS.sessionClosed();
      if (!(await openedBySameUser(p, s))) throw ERRORS.sessionOfAnotherCaller();
    },

    /** A gateway channel attached to the session: it is active until the returned detach. */
    async attach(id: string): Promise<() => void> {
      attached.set(id, (attached.get(id) ?? 0) + 1);
      const at = d.now().toISOString();
      await store.db.tx(async () => {
        await store.sessions.touch(id, at);
        await store.sessions.setState(id, 'idle', 'active');
      });
      let done = false;
      return () => {
        if (done) return;
        done = true;
        const n = (attached.get(id) ?? 1) - 1;
        if (n > 0) attached.set(id, n);
        else attached.delete(id);
        // The idle clock starts when the last client leaves (a store already closed at shutdown: nothing to record).
        store.sessions.touch(id, d.now().toISOString()).catch(() => undefined);
      };
    },

    /**
     * Every process, every SESSION_SWEEP_MS: the sessions this process's gateway has attached are in use now (the
     * sweep may run in another process, which cannot see them).
     */
    async touchAttached(): Promise<void> {
      const at = d.now().toISOString();
      for (const id of attached.keys()) await store.sessions.touch(id, at);
    },

    /**
     * At server start: no socket survived, so sessions that were `active` may have been attached until
     * the process ended; their idle clock starts now (like metering, down time is not counted).
     */
    async resume(): Promise<void> {
      await store.sessions.touchActive(d.now().toISOString());
    },

    /**
     * Moves unattached sessions to `idle` after IDLE_AFTER_MS and closes them after EXPIRE_AFTER_MS
     * (both counted from the last time they were in use). Returns what changed (tests).
     *
     * One transaction: what it read (activity, leases) cannot change under its decisions, and an attach
     * (which records itself in a transaction) lands wholly before or after the sweep.
     */
    sweep(): Promise<{ idled: string[]; expired: string[] }> {
      const nowMs = d.now().getTime();
      const at = d.now().toISOString();
      return store.db.tx(async () => {
        const idled: string[] = [];
        const expired: string[] = [];
        for (const s of await store.sessions.openWithActivity(nowMs)) {
          if ((attached.get(s.id) ?? 0) > 0 || s.leased) {
            // In use: keep its activity current so the clock starts when the use ends.
            await store.sessions.touch(s.id, at);
            if (s.state === 'idle') await store.sessions.setState(s.id, 'idle', 'active');
            continue;
          }
          const since = nowMs - Date.parse(s.last_active);
          if (since >= EXPIRE_AFTER_MS) {
            if (!(await store.sessions.close(s.id, at))) continue;
            const by = { type: 'system' as const, id: null };
            await leases.releaseInTx(s.org_id, s.machine_id, 'session_closed', by, s.id);
            await events.append(s.org_id, s.machine_id, 'session.disconnected', { session_id: s.id, reason: 'expired', by });
            expired.push(s.id);
          } else if (since >= IDLE_AFTER_MS && s.state === 'active' && (await store.sessions.setState(s.id, 'active', 'idle'))) {
            idled.push(s.id);
          }
        }
        return { idled, expired };
      });
    },
  };
}
export type SessionService = ReturnType<typeof createSessionService>;
