/** Reading machines: one and a page of them (where a machine's agent is reached: services/machine-agent). */
import type { Machine, MachineListQuery } from '../../../../shared/schemas/machine.js';
import type { Page } from '../../../../shared/schemas/pagination.js';
import { pageOf } from '../../store/pagination.js';
import { machineView, type MachineCore } from './core.js';

export function createMachineReads(c: MachineCore) {
  const { d } = c;
  return {
    get: (orgId: string, id: string): Promise<Machine> => c.current(orgId, id),

    list(orgId: string, q: MachineListQuery): Promise<Page<Machine>> {
      return pageOf(q, (after, limit) => d.store.machines.page(orgId, after, limit, q.state ?? null), machineView);
    },
  };
}
