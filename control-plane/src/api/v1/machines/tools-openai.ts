import { OpenAIToolRequest, OpenAIToolResult } from '../../../../../shared/schemas/computer-tools.js';
import { runOpenAITool } from '../../../computer-tools/openai.js';
import { defineOp } from '../../op.js';
import { toolOpContext } from './tool-context.js';

/**
 * Extension (not in the spec): the action of one OpenAI `computer_call`, carried out on the machine;
 * answers the `computer_call_output` item. The caller's session must hold the input lease.
 */
export default defineOp({
  name: 'machines.tools_openai',
  method: 'post',
  path: '/machines/:machine_id/tools/openai',
  summary: "Carry out one OpenAI computer_call action and answer the computer_call_output with the settled screenshot.",
  auth: 'any',
  permission: 'machines:control',
  body: OpenAIToolRequest,
  responses: { 200: OpenAIToolResult },
  async handler(c, s, io) {
    const { body, call, reply } = await toolOpContext(c, s, () => io.body());
    return reply(await runOpenAITool(body, call));
  },
});
