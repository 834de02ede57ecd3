import { AGENT_ROUTES } from '../../../../../shared/agent-protocol.js';
import { AnthropicToolRequest, AnthropicToolResult } from '../../../../../shared/schemas/computer-tools.js';
import { readAgentAnswer } from '../../../agent-client/answer.js';
import { runAnthropicTool, type AgentCall } from '../../../computer-tools/anthropic.js';
import { defineOp } from '../../op.js';
import { machineIdParam } from './proxy.js';

/**
 * Extension (not in the spec): one input of Anthropic's computer-use tool, as the model emitted it,
 * carried out on the machine; answers the tool_result content. Input routes underneath, so the
 * caller's session must hold the input lease (X-Session-Id, optional X-Lease-Fence).
 */
export default defineOp({
  name: 'machines.tools_anthropic',
  method: 'post',
  path: '/machines/:machine_id/tools/anthropic',
  summary: "Carry out one action of Anthropic's computer-use tool (computer_20250124/computer_20251124) and answer the tool_result content.",
  auth: 'any',
  permission: 'machines:control',
  body: AnthropicToolRequest,
  responses: { 200: AnthropicToolResult },
  async handler(c, s, io) {
    const p = c.get('principal');
    const machineId = machineIdParam(c);
    // Existence and state first: another organization's machine is 404 whatever the body says.
    s.machines.agentTarget(p.org_id!, machineId);
    const body = await io.body();
    s.leases.checkInput(p, machineId, c.req.header('x-session-id'), c.req.header('x-lease-fence'));
    const requestId = c.get('requestId');
    const call: AgentCall = async (op, agentBody, query) => {
      const route = AGENT_ROUTES[op];
      const res = await s.machines.callAgent(p.org_id!, machineId, {
        method: route.method,
        path: route.path + (query ? `?${query}` : ''),
        body: agentBody === undefined ? undefined : JSON.stringify(agentBody),
        requestId,
      });
      return readAgentAnswer(op, res);
    };
    return c.json(await runAnthropicTool(body, call), 200);
  },
});
