// Entry point: flags → config → wiring. Nothing else lives here.
import { startAgent } from './agent.js';
import { AGENT_HELP, parseAgentArgs } from './config.js';
import { stderrLog } from './http/log.js';

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseAgentArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`computer-agent: ${(e as Error).message}\n\n${AGENT_HELP}`);
    process.exit(2);
  }
  if (parsed.help) {
    process.stdout.write(AGENT_HELP);
    return;
  }
  const agent = await startAgent(parsed.config, stderrLog);
  const stop = () => {
    agent.close().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e) => {
  // The message may carry a path from the command line the operator gave; that is not request data.
  process.stderr.write(`computer-agent: ${(e as Error).message}\n`);
  process.exit(1);
});
