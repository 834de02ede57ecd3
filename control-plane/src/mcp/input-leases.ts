import { LeaseGrant, Session } from '../../../shared/schemas/responses.js';
import type { V1Answer, V1Caller } from './caller.js';

/**
 * The input lease an MCP session holds on each machine it sends input to. MCP clients know nothing of
 * sessions and fences, so the server keeps them per MCP session: the first input tool call on a machine
 * opens an `agent` session (as the calling key) and takes the lease without force; later calls renew it
 * when less than half its TTL is left. A person who takes over with `force` wins: the next tool call
 * fails with the lease holder named, and tries again (never forcing) on each later call. Closing the MCP
 * session closes these sessions, which releases their leases; an MCP client that goes quiet loses its
 * lease after LEASE_TTL_SECONDS anyway.
 */
export const LEASE_TTL_SECONDS = 60;
const RENEW_BELOW_MS = (LEASE_TTL_SECONDS * 1000) / 2;

/** A /v1 answer that failed; the tool reports its envelope. */
export class V1Failure extends Error {
  constructor(readonly answer: V1Answer) {
    super(`HTTP ${answer.status}`);
  }
}

interface Held {
  sessionId: string;
  fence: number;
  /** 0 until granted, and after a lost lease, so the next call asks again. */
  expiresAt: number;
}

export function createInputLeases(now: () => number = Date.now) {
  const held = new Map<string, Held>();
  // One acquisition at a time per machine, so two concurrent tool calls never open two sessions.
  const chains = new Map<string, Promise<unknown>>();

  async function ensure(caller: V1Caller, machineId: string): Promise<Held> {
    let h = held.get(machineId);
    if (!h) {
      const r = await caller.call('POST', '/v1/sessions', { body: { machine_id: machineId, type: 'agent' } });
      if (r.status !== 201) throw new V1Failure(r);
      h = { sessionId: Session.parse(r.json).id, fence: 0, expiresAt: 0 };
      held.set(machineId, h);
    }
    if (h.expiresAt - now() >= RENEW_BELOW_MS) return h;
    const r = await caller.call('POST', `/v1/machines/${machineId}/input-lease`, { body: { session_id: h.sessionId, ttl_seconds: LEASE_TTL_SECONDS } });
    if (r.status !== 200) {
      // A session someone closed is replaced on the next call; an open one is kept (the lease is just held by another).
      const s = await caller.call('GET', `/v1/sessions/${h.sessionId}`);
      if (s.status !== 200 || Session.parse(s.json).state === 'closed') held.delete(machineId);
      throw new V1Failure(r);
    }
    const g = LeaseGrant.parse(r.json);
    h.fence = g.fence;
    h.expiresAt = Date.parse(g.expires_at);
    return h;
  }

  return {
    /** The X-Session-Id and X-Lease-Fence headers for an input call on the machine. Throws V1Failure. */
    async headers(caller: V1Caller, machineId: string): Promise<Record<string, string>> {
      const run = (chains.get(machineId) ?? Promise.resolve()).then(() => ensure(caller, machineId));
      chains.set(machineId, run.catch(() => undefined));
      const h = await run;
      return { 'x-session-id': h.sessionId, 'x-lease-fence': String(h.fence) };
    },
    /** An input call was refused for the lease (409): ask again on the next call. */
    lost(machineId: string): void {
      const h = held.get(machineId);
      if (h) h.expiresAt = 0;
    },
    /** The sessions opened so far (to close when the MCP session ends). */
    sessionIds(): string[] {
      return [...held.values()].map((h) => h.sessionId);
    },
  };
}
export type InputLeases = ReturnType<typeof createInputLeases>;
