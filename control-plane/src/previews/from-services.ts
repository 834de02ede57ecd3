/**
 * The preview proxy from the control plane's real services; main.ts wires it next to the gateway:
 *
 *   const previews = previewProxyFromServices(services, { egress: gw.egress, log });
 *   const server = createHttpServer(app.fetch, previews);
 *   attachGateway(server, gw.deps, { skip: (req) => previews?.owns(req) ?? false });
 */
import type { EgressMeter } from '../gateway/deps.js';
import type { LogSink } from '../log.js';
import type { Services } from '../services/index.js';
import type { PreviewAdmissionLimits } from './admission.js';
import type { PreviewForwarding } from './deps.js';
import { createPreviewProxy, type PreviewProxy } from './proxy.js';

export interface PreviewsFromServicesOptions {
  egress: EgressMeter;
  log?: LogSink;
  /** Deadline for reaching the agent and for its stream's answer. */
  agentTimeoutMs?: number;
  headerTimeoutMs?: number;
  /** Preview connection bounds (previews/admission.ts; the defaults there in production). */
  limits?: PreviewAdmissionLimits;
  /** Forward previews of machines another process owns (docs/cluster.md; absent: serve all here). */
  forwarding?: PreviewForwarding;
}

/** null when this deployment serves no preview domain (PREVIEW_DOMAIN=off, or a public HOST without one). */
export function previewProxyFromServices(s: Services, o: PreviewsFromServicesOptions): (PreviewProxy & { close(): void }) | null {
  if (!s.ports.domain) return null;
  // Streams share the pool's one session per machine (a VM's channel takes a single connection).
  const streams = s.agent.streams({ timeoutMs: o.agentTimeoutMs, endWithRun: false });
  const proxy = createPreviewProxy({
    ports: s.ports,
    agentTarget: (orgId, machineId) => s.agent.running(orgId, machineId),
    openStream: (target, req) => streams.open(target, req),
    egress: o.egress,
    secureCookies: new URL(s.config.publicBaseUrl).protocol === 'https:',
    trustProxy: s.config.trustProxy,
    log: o.log,
    headerTimeoutMs: o.headerTimeoutMs,
    limits: o.limits,
    forwarding: o.forwarding,
  });
  return {
    ...proxy,
    close() {
      proxy.close();
      streams.close();
    },
  };
}
