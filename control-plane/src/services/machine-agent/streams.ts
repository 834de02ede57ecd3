/**
 * Long-lived agent streams (screen frames, terminal attach, TCP) on the machine's one HTTP/2 session: a
 * VM's virtio-serial chardev takes a single host connection, so a door never dials its own. Each door
 * opens its own set (its own deadline, closed at its own shutdown) over the one pool.
 */
import type { EventService } from '../events.js';
import { AgentStreamDialer, type AgentPool, type OpenedStream } from './client.js';
import type { StreamRequest } from './paths.js';
import type { AgentTarget } from './target.js';

/** Events that end a machine's run: streams on it must not outlive it. */
const END_RUN = new Set(['machine.stopped', 'machine.deleted', 'machine.failed', 'machine.restore_started']);

export interface AgentStreamOptions {
  /** Deadline for reaching the agent and for the stream's response headers. */
  timeoutMs?: number;
  /**
   * End the machine's session when its run ends (stop, delete, failure, restore), even where the
   * substrate leaves a channel open: viewers then see compute_unavailable, terminals close with 4503.
   */
  endWithRun: boolean;
}

export interface AgentStreams {
  open(target: AgentTarget, req: StreamRequest): Promise<OpenedStream>;
  /** Shutdown: new opens fail as compute_unavailable. */
  close(): void;
}

export function createAgentStreams(d: { pool: AgentPool; events: EventService }, o: AgentStreamOptions): AgentStreams {
  const dialer = new AgentStreamDialer({ session: (id, key) => d.pool.session(id, key), drop: (id) => d.pool.drop(id), timeoutMs: o.timeoutMs });
  const watched = new Map<string, () => void>();
  const watchRun = (machineId: string) => {
    if (watched.has(machineId)) return;
    watched.set(machineId, d.events.subscribe(machineId, null, (ev) => {
      if (!END_RUN.has(ev.event.type)) return;
      dialer.drop(machineId);
      watched.get(machineId)?.();
      watched.delete(machineId);
    }));
  };
  return {
    open(target, req) {
      if (o.endWithRun) watchRun(target.id);
      return dialer.open(target.id, target.token, req);
    },
    close() {
      for (const off of watched.values()) off();
      watched.clear();
      dialer.close();
    },
  };
}
