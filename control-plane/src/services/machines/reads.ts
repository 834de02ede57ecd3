/** Reading machines: one, a page of them, and where a running machine's agent is reached. */
import type { Machine, MachineListQuery } from '../../../../shared/schemas/machine.js';
import type { Page } from '../../../../shared/schemas/pagination.js';
import type { AgentRequest, AgentResponse } from '../../agent-client/pool.js';
import { isTransient } from '../../domain/machine-lifecycle.js';
import { pageOf } from '../../store/pagination.js';
import { machineView, type MachineCore } from './core.js';
import { ERRORS } from '../../errors.js';

export function createMachineReads(c: MachineCore) {
  const { d } = c;
  return {
    get: (orgId: string, id: string): Machine => c.current(orgId, id),

    list(orgId: string, q: MachineListQuery): Page<Machine> {
      return pageOf(q, (after, limit) => d.store.machines.page(orgId, after, limit, q.state ?? null), machineView);
    },

    /** The running machine's agent, or why it cannot be reached. */
    agentTarget(orgId: string, id: string): { id: string; token: string } {
      const m = c.load(orgId, id);
      if (m.state === 'running') return { id: m.id, token: m.agent_token };
      if (isTransient(m.state) && m.state !== 'deleting' && m.state !== 'stopping') {
        throw ERRORS.machineSettling(m.state);
      }
      throw ERRORS.mustBeRunning(m.state);
    },

    /** One request to the machine's agent (the proxy routes use this). */
    async callAgent(orgId: string, id: string, req: AgentRequest): Promise<AgentResponse> {
      const t = this.agentTarget(orgId, id);
      return d.pool.request(t.id, t.token, req);
    },
  };
}
