import { Hono } from 'hono';
import { AGENT_ROUTES } from '../../../shared/agent-protocol.js';
import type { AgentEnv } from '../http/env.js';
import { jsonBody } from '../http/body.js';
import { runCommand, type ExecOptions } from '../exec/run.js';

/** POST /exec: one-shot command. */
export function execRoutes(opts: ExecOptions = {}): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();
  app.post(AGENT_ROUTES.exec.path, async (c) => {
    const req = await jsonBody(c, AGENT_ROUTES.exec.body);
    return c.json(await runCommand(req, opts));
  });
  return app;
}
