import { Hono } from 'hono';
import { AGENT_ROUTES } from '../../../shared/agent-protocol.js';
import type { GuestUser } from '../../../shared/schemas/common.js';
import type { AgentEnv } from '../http/env.js';
import type { FileOps } from '../files/user-files.js';
import { jsonBody, queryOf } from '../http/body.js';

const R = AGENT_ROUTES;

/**
 * Who performs a files operation. `agent` (the default) is the files worker, a process with the agent
 * user's credentials; `root` is the agent itself. The control plane lets only machines:control callers
 * ask for root.
 */
export interface FilesBy {
  root: FileOps;
  agent: FileOps;
}

/** GET /files, GET /files/content, PUT /files/content. */
export function filesRoutes(by: FilesBy): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();
  const as = (u: GuestUser): FileOps => (u === 'root' ? by.root : by.agent);
  app.get(R['files.list'].path, async (c) => {
    const q = queryOf(c, R['files.list'].query);
    return c.json(await as(q.user).list(q.path));
  });
  app.get(R['files.read'].path, async (c) => {
    const q = queryOf(c, R['files.read'].query);
    return c.json(await as(q.user).read(q));
  });
  app.put(R['files.write'].path, async (c) => {
    const q = queryOf(c, R['files.write'].query);
    const body = await jsonBody(c, R['files.write'].body);
    return c.json(await as(body.user).write(q.path, body));
  });
  return app;
}
