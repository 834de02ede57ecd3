import type { Context } from 'hono';
import type { AgentCall } from '../../../computer-tools/anthropic.js';
import type { CpEnv } from '../../../context.js';
import type { Services } from '../../../services/index.js';
import { checkInputLease, machineIdParam, meteredAnswer } from './proxy.js';

/**
 * The checks every tool endpoint makes, in the proxy's order (machine, body, lease), and the agent
 * caller its actions go through: each answer parsed against its route's schema like any agent answer.
 */
export async function toolOpContext<B>(
  c: Context<CpEnv>,
  s: Services,
  body: () => Promise<B>,
): Promise<{ body: B; call: AgentCall; reply: (answer: unknown) => Response }> {
  const p = c.get('orgPrincipal');
  const machineId = machineIdParam(c);
  // Existence and state first: another organization's machine is 404 whatever the body says.
  await s.agent.running(p.org_id, machineId);
  const parsed = await body();
  await checkInputLease(c, s, machineId);
  const requestId = c.get('requestId');
  const call: AgentCall = async (op, agentBody, query) =>
    s.agent.call(await s.agent.running(p.org_id, machineId), op, { query, body: agentBody === undefined ? undefined : JSON.stringify(agentBody), requestId });
  // The tool's answer (screenshots, mostly) leaves on the machine's behalf: counted as its egress.
  return { body: parsed, call, reply: (answer) => meteredAnswer(c, s, machineId, answer) };
}
