/**
 * GatewayDeps from the control plane's real services. main.ts's serve() wires it:
 *
 *   const gw = gatewayDepsFromServices(services, { log });
 *   const gateway = attachGateway(server, gw.deps);
 *   // on close: await gateway.close(); gw.close();
 */
import type { IncomingMessage } from 'node:http';
import { readSessionCookie } from '../auth/cookies.js';
import { isRecognisedOrigin } from '../config.js';
import type { Principal } from '../context.js';
import type { LogSink } from '../log.js';
import { decodeEventCursor } from '../services/events.js';
import type { Services } from '../services/index.js';
import type { EgressMeter, GatewayDeps, GatewayForwarding } from './deps.js';

export interface FromServicesOptions {
  log?: LogSink;
  /** Where served bytes are counted (default: the metering service's tally, recorded as egress_bytes at each flush). */
  egress?: EgressMeter;
  /** Deadline for reaching an agent and for its stream's response headers. */
  agentTimeoutMs?: number;
  /** Forward channels of machines another process owns (docs/cluster.md; absent: serve all here). */
  forwarding?: GatewayForwarding;
}

/** The same credential rules as the API's authenticate middleware: a bad key never falls back to the cookie. */
export async function principalFromUpgrade(s: Services, req: IncomingMessage): Promise<Principal | null> {
  const authz = req.headers.authorization;
  if (authz !== undefined) {
    const m = /^Bearer (\S+)$/.exec(authz);
    return m ? s.identity.principalFromApiKey(m[1]!) : null;
  }
  // Two session cookies (one tossed from a sibling domain) authenticate nobody, as in the API.
  const read = readSessionCookie(req.headers.cookie, s.config.secureCookies);
  return read.kind === 'one' ? s.identity.principalFromCookie(read.token) : null;
}

export function gatewayDepsFromServices(s: Services, o: FromServicesOptions = {}): { deps: GatewayDeps; egress: EgressMeter; close(): void } {
  const egress = o.egress ?? s.metering.egress;
  // Streams share the pool's one session per machine and must not outlive the machine's run.
  const streams = s.agent.streams({ timeoutMs: o.agentTimeoutMs, endWithRun: true });

  const deps: GatewayDeps = {
    authenticate: (req) => principalFromUpgrade(s, req),
    isRecognisedOrigin: (origin) => isRecognisedOrigin(s.config, origin),
    getMachine: (orgId, id) => s.machines.get(orgId, id),
    async openAgentStream(orgId, id, req) {
      return streams.open(await s.agent.running(orgId, id), req);
    },
    async callAgent(orgId, id, req) {
      const r = await s.agent.forward(await s.agent.running(orgId, id), { method: req.method, path: req.path, body: req.body });
      return { status: r.status, body: r.body };
    },
    secretForTyping: (orgId, id, name) => s.secrets.valueForTyping(orgId, id, name),
    // Security gate: the input channel's lease decisions are the lease service's own (domain/lease.ts
    // through services/leases.ts), never a copy, so the gateway and /v1 cannot disagree on a fence.
    leases: {
      checkSession: (p, machineId, sessionId) => s.leases.checkSession(p, machineId, sessionId),
      checkFence: (p, machineId, sessionId, fence) => s.leases.checkFence(p, machineId, sessionId, fence),
      watch: (machineId, onReleased) => s.leases.watch(machineId, onReleased),
    },
    events: {
      validateCursor: (cursor) => void decodeEventCursor(cursor),
      subscribe: (machineId, cursor, deliver) => s.events.subscribe(machineId, cursor, deliver),
    },
    egress,
    sessions: {
      checkAttach: (p, machineId, sessionId) => s.sessions.checkAttach(p, machineId, sessionId),
      attach: (sessionId) => s.sessions.attach(sessionId),
    },
    forwarding: o.forwarding,
    log: o.log,
  };
  return {
    deps,
    egress,
    close: () => streams.close(),
  };
}
