/** What the preview proxy is given (PreviewProxyDeps) and what its parts share for its lifetime (ProxyContext). */
import type { AssertedClient } from '../cluster/forward/assertion.js';
import type { Forwarder } from '../cluster/forward/forwarder.js';
import type { OwnerOf } from '../cluster/forward/owner.js';
import type { EgressMeter } from '../gateway/deps.js';
import type { AgentTarget, OpenedStream, StreamRequest } from '../services/machine-agent/index.js';
import type { LogSink } from '../log.js';
import type { PortService } from '../services/ports.js';
import type { PreviewAdmission, PreviewAdmissionLimits } from './admission.js';
import type { PreviewConnections } from './connections.js';

/**
 * Preview connections for machines another process of the deployment drives (docs/cluster.md): admitted here
 * (and the access link traded here), then forwarded to the owner's internal listener as the preview's visitor.
 * Absent: every preview is served by this process.
 */
export interface PreviewForwarding {
  ownerOf: OwnerOf;
  forwarder: Pick<Forwarder, 'request' | 'upgrade'>;
}

/** A visitor another process admitted and forwarded: the preview it was admitted to, its request id, and itself. */
export interface ForwardedVisitor {
  previewId: string;
  requestId: string;
  client: AssertedClient;
}

export interface PreviewProxyDeps {
  ports: PortService;
  /** The running machine's agent; throws AppError when it is not running. */
  agentTarget(orgId: string, machineId: string): Promise<AgentTarget>;
  /** Opens an agent stream (the machine-agent service's streams). */
  openStream(target: AgentTarget, req: StreamRequest): Promise<OpenedStream>;
  /**
   * Where bytes served to preview clients are counted, per machine (egress_bytes). main.ts passes the
   * gateway's EgressCounter, so the metering flush sees one figure per machine.
   */
  egress: EgressMeter;
  /** Set the cookie's Secure attribute (the public URL is https). */
  secureCookies: boolean;
  /** Take the client address from X-Forwarded-For's right-most entry (TRUST_PROXY). */
  trustProxy: boolean;
  log?: LogSink;
  /** Deadline for the guest's response headers (default 100 s, as common TLS proxies use). */
  headerTimeoutMs?: number;
  /** Open connections per machine and the global byte budget (admission.ts; defaults there). */
  limits?: PreviewAdmissionLimits;
  /** Forward previews of machines another process owns (absent: serve every preview here). */
  forwarding?: PreviewForwarding;
}

/** One proxy's shared state, built once by createPreviewProxy and handed to each request's handler. */
export interface ProxyContext {
  deps: PreviewProxyDeps;
  log: LogSink;
  headerTimeoutMs: number;
  admission: PreviewAdmission;
  connections: PreviewConnections;
}
