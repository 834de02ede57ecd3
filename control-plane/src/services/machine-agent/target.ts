/**
 * Where a machine's agent lives, and whether it may be reached now. `agentOf` is the one answer to "where":
 * today the machine's own HTTP/2 session in this process's pool, keyed by machine id with its agent key
 * (the many-hosts issue replaces this function).
 */
import { ERRORS } from '../../errors.js';
import type { MachineState } from '../../../../shared/schemas/machine.js';
import { isTransient } from '../../domain/machine-lifecycle.js';

/** A machine's agent: the pool's key for its session and the bearer it presents. */
export interface AgentTarget {
  id: string;
  token: string;
}

export function agentOf(m: { id: string; agent_token: string }): AgentTarget {
  return { id: m.id, token: m.agent_token };
}

/** The running-state rule every door applies: the machine's agent, or why it cannot be reached. */
export function runningAgent(m: { id: string; agent_token: string; state: MachineState }): AgentTarget {
  if (m.state === 'running') return agentOf(m);
  if (isTransient(m.state) && m.state !== 'deleting' && m.state !== 'stopping') {
    throw ERRORS.machineSettling(m.state);
  }
  throw ERRORS.mustBeRunning(m.state);
}
