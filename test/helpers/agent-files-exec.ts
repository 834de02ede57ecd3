/** Stand an agent up over the real channel (HTTP/2 on a unix socket) with given route groups. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Hono } from 'hono';
import { createAgentApp, type AgentEnv } from '../../agent/src/app.js';
import { Enrollment } from '../../agent/src/enrollment.js';
import { closeAgentServer, createAgentServer } from '../../agent/src/channel/server.js';
import { listenUnix } from '../../agent/src/channel/unix-socket.js';
import type { LogLine } from '../../agent/src/http/log.js';
import { H2Client } from './h2-client.js';

export const TOKEN = 'tok_' + 'f'.repeat(40);

export interface TestAgent {
  dir: string;
  sock: string;
  enrollFile: string;
  client: H2Client;
  lines: LogLine[];
  /** Everything logged so far, as one string, for scanning. */
  logText(): string;
  close(): Promise<void>;
}

/**
 * Directory and enrollment secret first (the denylist needs the path), then the server. The secret is TOKEN
 * itself, and the agent is enrolled with TOKEN as its key, so tests speak with one value throughout.
 */
export function agentPaths(prefix: string): { dir: string; sock: string; enrollFile: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const enrollFile = path.join(dir, 'enroll');
  fs.writeFileSync(enrollFile, TOKEN, { mode: 0o600 });
  return { dir, sock: path.join(dir, 'agent.sock'), enrollFile };
}

export async function startAgent(p: { dir: string; sock: string; enrollFile: string }, mounts: Hono<AgentEnv>[]): Promise<TestAgent> {
  const lines: LogLine[] = [];
  const log = (l: LogLine) => lines.push(l);
  const app = createAgentApp({ enrollment: new Enrollment({ kind: 'file', path: p.enrollFile }), log, mounts });
  const server = createAgentServer(app, log);
  const listener = await listenUnix(server, p.sock);
  const client = new H2Client(p.sock, TOKEN);
  const enrolled = await client.request('POST', '/auth/enroll', { key: TOKEN });
  if (enrolled.status !== 204) throw new Error(`test agent refused its enrollment (${enrolled.status})`);
  return {
    ...p,
    client,
    lines,
    logText: () => JSON.stringify(lines),
    async close() {
      await closeAgentServer(server, listener);
      await client.close();
      fs.rmSync(p.dir, { recursive: true, force: true });
    },
  };
}

export const q = (p: string) => encodeURIComponent(p);
