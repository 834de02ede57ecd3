/**
 * Extension (not in the spec): the MCP server at /v1/mcp (docs/mcp.md), streamable HTTP with sessions
 * (the Mcp-Session-Id header), JSON answers (no SSE: no tool streams progress), no server-initiated
 * stream (GET answers 405, which clients accept). Each MCP session is one McpServer + transport in
 * memory, bound to the API key that initialized it; its tools act through /v1 (caller.ts).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Hono } from 'hono';
import { randomUUID } from 'node:crypto';
import { ERRORS } from '../errors.js';
import { MAX_MACHINE_BODY_BYTES } from '../../../shared/schemas/files.js';
import { authenticate, requireOrg } from '../api/middleware/auth.js';
import type { CpEnv, OrgPrincipal } from '../context.js';
import type { Services } from '../services/index.js';
import { v1Caller, type V1Caller } from './caller.js';
import { noStreamBody, refusalOf } from './http-errors.js';
import { createInputLeases, type InputLeases } from './input-leases.js';
import { registerTools } from './tools.js';

export const MCP_PATH = '/v1/mcp';

/** Default bounds on open MCP sessions (docs/mcp.md, "Transport and sessions"). */
export const MCP_SESSIONS_PER_KEY = 16;
export const MCP_SESSIONS_PER_ORG = 64;
export const MCP_SESSIONS_PER_SERVER = 1024;

export interface McpOptions {
  /** An MCP session unused this long is closed (its machine sessions too) at the next request. */
  idleMs?: number;
  /** Open MCP sessions per API key; a new one beyond it closes that key's least recently used. */
  maxPerKey?: number;
  /** Open MCP sessions per organization (all its keys); beyond it that organization's initialize is refused (429). */
  maxPerOrg?: number;
  /** Open MCP sessions on this server; beyond it initialize is refused (429). */
  maxSessions?: number;
  now?: () => number;
}

interface Entry {
  transport: WebStandardStreamableHTTPServerTransport;
  server: McpServer;
  owner: string;
  /** The principal of the latest request, to close the session's machine sessions as that key. */
  principal: OrgPrincipal;
  lastUsed: number;
  leases: InputLeases;
}

/** An MCP session belongs to one API key acting in one organization. */
const ownerOf = (p: OrgPrincipal) => `${p.api_key_id}:${p.org_id}`;

export function mountMcp(
  app: Hono<CpEnv>,
  s: Services,
  dispatch: (req: Request, env: CpEnv['Bindings']) => Response | Promise<Response>,
  o: McpOptions = {},
): void {
  const idleMs = o.idleMs ?? 30 * 60_000;
  const maxPerKey = o.maxPerKey ?? MCP_SESSIONS_PER_KEY;
  const maxPerOrg = o.maxPerOrg ?? MCP_SESSIONS_PER_ORG;
  const maxSessions = o.maxSessions ?? MCP_SESSIONS_PER_SERVER;
  const now = o.now ?? Date.now;
  const sessions = new Map<string, Entry>();
  // The /v1 caller of each MCP request, found by a tool call through the AuthInfo object the transport hands it.
  const callers = new WeakMap<object, V1Caller>();

  async function close(id: string, e: Entry): Promise<void> {
    sessions.delete(id);
    for (const sid of e.leases.sessionIds()) {
      try {
        await s.sessions.close(e.principal, sid); // releases the lease
      } catch {
        // Already gone with its machine, or the key lost sessions:write; the lease still expires on its own.
      }
    }
    await e.server.close().catch(() => undefined);
  }

  // A revoked key, or every key of a member who left, loses its MCP sessions (and their input leases) at once.
  s.orgs.onKeysLost((lost) => {
    for (const [id, e] of [...sessions]) {
      if (e.principal.org_id !== lost.org_id) continue;
      if ('key_id' in lost ? e.principal.api_key_id === lost.key_id : e.principal.user_id === lost.user_id) void close(id, e);
    }
  });

  async function sweep(): Promise<void> {
    const t = now();
    for (const [id, e] of [...sessions]) if (t - e.lastUsed > idleMs) await close(id, e);
  }

  async function open(p: OrgPrincipal): Promise<Entry> {
    const mine = [...sessions].filter(([, e]) => e.owner === ownerOf(p)).sort((a, b) => a[1].lastUsed - b[1].lastUsed);
    for (const [id, e] of mine.slice(0, Math.max(0, mine.length - maxPerKey + 1))) await close(id, e);
    // One organization (any number of keys) cannot take the server's sessions from the others.
    if ([...sessions.values()].filter((e) => e.principal.org_id === p.org_id).length >= maxPerOrg) {
      throw ERRORS.mcpOrgSessionLimit(maxPerOrg);
    }
    if (sessions.size >= maxSessions) throw ERRORS.mcpServerSessionLimit();
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      maxRequestBodySize: MAX_MACHINE_BODY_BYTES,
      // DELETE /v1/mcp by the client.
      onsessionclosed: (id) => close(id, entry),
    });
    const server = new McpServer({ name: 'computer', version: '1.0.0' }, { capabilities: { tools: {} } });
    const leases = createInputLeases();
    const entry: Entry = { transport, server, owner: ownerOf(p), principal: p, lastUsed: now(), leases };
    registerTools(server, {
      leases,
      callerOf(extra) {
        const c = extra.authInfo ? callers.get(extra.authInfo) : undefined;
        if (!c) throw new Error('tool call without its request');
        return c;
      },
    });
    await server.connect(transport);
    return entry;
  }

  app.on(
    ['GET', 'POST', 'DELETE'],
    MCP_PATH,
    async (c, next) => {
      c.set('operation', 'mcp');
      // Security gate: API keys only. A browser's cookie never reaches the tools (no CSRF surface, and
      // MCP clients are programs); the key then passes the same authentication and organization gates as /v1.
      if (c.req.header('authorization') === undefined) throw ERRORS.mcpNeedsApiKey();
      await next();
    },
    authenticate(s, 'any'),
    requireOrg(),
    async (c) => {
      if (c.req.method === 'GET') return c.json(noStreamBody(c.get('requestId')), 405, { allow: 'POST, DELETE' });
      await sweep();
      const p = c.get('orgPrincipal');
      const authInfo: AuthInfo = { token: p.api_key_id ?? '', clientId: p.api_key_id ?? '', scopes: p.scopes ?? [] };
      callers.set(authInfo, v1Caller(c.req.url, c.req.header('authorization')!, (req) => dispatch(req, c.env)));
      const sid = c.req.header('mcp-session-id');
      if (sid !== undefined) {
        const e = sessions.get(sid);
        // Security gate: an MCP session (and the input leases it holds) is usable only by the key that opened it.
        if (!e || e.owner !== ownerOf(p)) throw ERRORS.noSuchMcpSession();
        e.lastUsed = now();
        e.principal = p;
        const res = await e.transport.handleRequest(c.req.raw, { authInfo });
        const refused = await refusalOf(res);
        if (refused) throw refused;
        return res;
      }
      if (c.req.method !== 'POST') throw ERRORS.mcpSessionIdRequired();
      const e = await open(p);
      const res = await e.transport.handleRequest(c.req.raw, { authInfo });
      const id = e.transport.sessionId;
      // Anything but a successful initialize leaves no session behind.
      if (id === undefined || res.status !== 200) await e.server.close().catch(() => undefined);
      else sessions.set(id, e);
      const refused = await refusalOf(res);
      if (refused) throw refused;
      return res;
    },
  );
}
