import fs from 'node:fs';
import path from 'node:path';
import type net from 'node:net';
import { createAgentApp } from './app.js';
import { closeAgentServer, createAgentServer } from './channel/server.js';
import { listenUnix } from './channel/unix-socket.js';
import { openVirtioPort, serveByteChannel } from './channel/virtio-serial.js';
import type { AgentConfig } from './config.js';
import { Enrollment } from './enrollment.js';
import { createDesktop } from './desktop/desktop.js';
import { preloadEncoder } from './desktop/screen.js';
import { createFileService } from './files/service.js';
import { createUserFiles } from './files/user-files.js';
import type { LogSink } from './http/log.js';
import { createPtyManager } from './pty/manager.js';
import { desktopRoutes } from './routes/desktop.js';
import { execRoutes } from './routes/exec.js';
import { filesRoutes } from './routes/files.js';
import { secretsRoutes } from './routes/secrets.js';
import { tcpRoutes } from './routes/tcp.js';
import { terminalsRoutes } from './routes/terminals.js';
import { createSecretStore } from './secrets/store.js';
import { guestUser } from './users.js';

export interface RunningAgent {
  close(): Promise<void>;
}

/** Wire every part of the agent from a validated config and serve it on the configured channel. */
export async function startAgent(config: AgentConfig, log: LogSink): Promise<RunningAgent> {
  const channelPaths = config.socket ? [config.socket, path.dirname(config.socket)] : [config.virtioPort!];
  const enrollment = new Enrollment(config.enrollFile ? { kind: 'file', path: config.enrollFile } : { kind: 'channel' });
  // The enrollment secret's path and the channel are never reachable through the files API (nor the secrets
  // dir: values are never read back out of the agent).
  const deny = { enrollFile: config.enrollFile, channelPaths, extraPaths: [config.secretsDir] };
  const files = createFileService({ deny, agentUserName: config.agentUser });
  // Files requests that do not ask for root run in a worker with the agent user's credentials.
  const userFiles = createUserFiles({ deny, user: guestUser('agent', config.agentUser), identities: () => files.denylist.identities() });
  const desktop = await createDesktop({
    display: config.display,
    fbdir: config.fbdir,
    readyFile: config.displayReady,
    log,
    browser: { command: config.browser, sandbox: config.browserSandbox === 'on', userName: config.agentUser },
  });
  const ptys = createPtyManager({ display: config.display, agentUserName: config.agentUser });
  const secrets = createSecretStore({ dir: config.secretsDir, profileScript: config.profileScript, userName: config.agentUser });

  const app = createAgentApp({
    enrollment,
    log,
    mounts: [
      desktopRoutes(desktop),
      filesRoutes({ root: files, agent: userFiles }),
      execRoutes({ display: config.display, agentUserName: config.agentUser }),
      terminalsRoutes(ptys),
      secretsRoutes(secrets),
      tcpRoutes(),
    ],
  });
  const requestLog: LogSink = config.quiet ? (l) => l.event !== 'request' && log(l) : log;
  const server = createAgentServer(app, requestLog);

  let listener: net.Server | null = null;
  let bridge: { close(): Promise<void> } | null = null;
  if (config.socket) listener = await listenUnix(server, config.socket);
  else bridge = serveByteChannel(server, openVirtioPort(config.virtioPort!), { log });
  log({ event: 'agent_started', channel: config.socket ? 'unix' : 'virtio' });
  // Right after listening rather than at import: the socket appears ~80 ms sooner, and loading runs while
  // the desktop's first check waits on its xrandr child. A failure here resurfaces on the first encode.
  setImmediate(() => {
    try {
      preloadEncoder();
    } catch {
      /* reported by the first screenshot */
    }
  });

  // Proof of a running event loop for the init's watchdog (a stopped or stuck agent stops rewriting it).
  const heartbeat = config.heartbeat ? setInterval(() => beat(config.heartbeat!), 1_000) : null;
  heartbeat?.unref();
  if (config.heartbeat) beat(config.heartbeat);

  return {
    async close() {
      if (heartbeat) clearInterval(heartbeat);
      // Live streams (screens, pty attaches, TCP) are ended, not waited for: a viewer never lets go by itself.
      const served = closeAgentServer(server, listener);
      await bridge?.close();
      ptys.closeAll();
      userFiles.close();
      desktop.close();
      await served;
    },
  };
}

function beat(file: string): void {
  try {
    fs.writeFileSync(file, `${Date.now()}\n`);
  } catch {
    /* the init notices a missing heartbeat; nothing to do here */
  }
}
