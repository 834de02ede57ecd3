import { AnthropicToolRequest, AnthropicToolResult } from '../../../../../shared/schemas/computer-tools.js';
import { runAnthropicTool } from '../../../computer-tools/anthropic.js';
import { defineOp } from '../../op.js';
import { toolOpContext } from './tool-context.js';

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
    const { body, call, reply } = await toolOpContext(c, s, () => io.body());
    return reply(await runAnthropicTool(body, call));
  },
});
