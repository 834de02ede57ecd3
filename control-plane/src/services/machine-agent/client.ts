/**
 * The agent client as the rest of the control plane sees it. This is the one module outside tests that
 * imports `agent-client/`: every door reaches a machine's agent through the machine-agent service, and takes
 * the client's types (answers, streams) from here.
 */
export { AgentPool, AGENT_STREAM_WINDOW_BYTES, type AgentPoolOptions, type AgentRequest, type AgentResponse } from '../../agent-client/pool.js';
export { readAgentAnswer, type AgentAnswerOf } from '../../agent-client/answer.js';
export { AgentStreamDialer, readAgentError, type OpenedStream } from '../../agent-client/streams.js';
