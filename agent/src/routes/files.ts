import { Hono } from 'hono';
import { AGENT_ROUTES } from '../../../shared/agent-protocol.js';
import type { AgentEnv } from '../app.js';
import { jsonBody, queryOf } from '../http/body.js';
import type { FileService } from '../files/service.js';

const R = AGENT_ROUTES;

/** GET /files, GET /files/content, PUT /files/content. */
export function filesRoutes(svc: FileService): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();
  app.get(R['files.list'].path, async (c) => {
    const q = queryOf(c, R['files.list'].query);
    return c.json(await svc.list(q.path));
  });
  app.get(R['files.read'].path, async (c) => {
    const q = queryOf(c, R['files.read'].query);
    return c.json(await svc.read(q));
  });
  app.put(R['files.write'].path, async (c) => {
    const q = queryOf(c, R['files.write'].query);
    const body = await jsonBody(c, R['files.write'].body);
    return c.json(await svc.write(q.path, body));
  });
  return app;
}
