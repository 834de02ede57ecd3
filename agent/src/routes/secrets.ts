import { Hono } from 'hono';
import { AGENT_ROUTES } from '../../../shared/agent-protocol.js';
import { parseOrThrow } from '../../../shared/errors.js';
import { SecretName } from '../../../shared/schemas/secrets.js';
import type { AgentEnv } from '../http/env.js';
import { jsonBody } from '../http/body.js';
import type { SecretStore } from '../secrets/store.js';

const R = AGENT_ROUTES;

/** PUT /secrets (replace the whole set), DELETE /secrets/:name. Answers carry names, never values. */
export function secretsRoutes(store: SecretStore): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();
  app.put(R['secrets.replace'].path, async (c) => {
    const body = await jsonBody(c, R['secrets.replace'].body);
    return c.json(await store.replace(body.secrets));
  });
  app.delete(R['secrets.delete'].path, async (c) => {
    const name = parseOrThrow(SecretName, c.req.param('name'), 'secret name', 'name');
    return c.json(await store.remove(name));
  });
  return app;
}
