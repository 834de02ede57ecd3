/**
 * What the gateway needs from the rest of the control plane. Small on purpose: tests pass stubs, and
 * `gatewayDepsFromServices` (from-services.ts) builds it from the real services.
 */
import type { IncomingMessage } from 'node:http';
import type { CallerRule } from '../cluster/forward/caller.js';
import type { Forwarder } from '../cluster/forward/forwarder.js';
import type { OwnerOf } from '../cluster/forward/owner.js';
import type { OrgPrincipal, Principal } from '../context.js';
import type { LogSink } from '../log.js';

/** A request to the machine's agent answered in one piece (resize, input). */
export interface AgentCall {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  /** JSON text. */
  body?: string;
}

export interface AgentAnswer {
  status: number;
  body: Buffer;
}

export type { OpenedStream } from '../services/machine-agent/index.js';
import type { OpenedStream } from '../services/machine-agent/index.js';

export interface GatewayLeases {
  /**
   * At the handshake: may this principal use `sessionId` for input on this machine at all (its own,
   * open, non-view session of this machine)? Throws AppError when not. Holding the lease is not needed yet.
   */
  checkSession(p: OrgPrincipal, machineId: string, sessionId: string): Promise<void>;
  /** Per message: does `sessionId` hold the lease with exactly this fence now? */
  checkFence(p: OrgPrincipal, machineId: string, sessionId: string, fence: number): Promise<{ ok: true } | { ok: false; current: number | null }>;
  /**
   * Calls `onReleased(sessionId, fence)` whenever a session stops holding the machine's lease grant
   * `fence` (takeover, release, expiry noticed, stop). Returns the unsubscribe function.
   */
  watch(machineId: string, onReleased: (sessionId: string, fence: number) => void): () => void;
}

export interface GatewayEvents {
  /** Throws AppError invalid_request for a cursor this server did not issue. */
  validateCursor(cursor: string): void;
  /** Every event after `cursor` (null: only new ones), in order, then live ones. Returns unsubscribe. */
  subscribe(machineId: string, cursor: string | null, deliver: (d: { cursor: string; event: unknown }) => void): () => void;
}

export interface EgressMeter {
  add(machineId: string, bytes: number): void;
}

/**
 * Channels for machines another process of the deployment drives (docs/cluster.md): after the handshake's
 * admission the channel is forwarded to the owner's internal listener, as the principal this process
 * authenticated and with no credential of the caller's. Absent: every channel is served by this process.
 */
export interface GatewayForwarding {
  ownerOf: OwnerOf;
  forwarder: Pick<Forwarder, 'upgrade'>;
  /** How this process reads a caller's address and scheme, for the assertion. */
  caller: CallerRule;
}

export interface GatewayDeps {
  /** The caller from the upgrade request's Authorization header or session cookie; null when neither is valid. */
  authenticate(req: IncomingMessage): Promise<Principal | null>;
  /** Whether a cookie-authenticated handshake comes from a recognised Origin. */
  isRecognisedOrigin(origin: string | undefined): boolean;
  /** Throws AppError not_found when the machine does not exist in the organization. */
  getMachine(orgId: string, machineId: string): Promise<{ id: string; state: string }>;
  /**
   * Open a stream to the machine's agent. Rejects with AppError (compute_unavailable when it cannot
   * be reached, conflict when the machine is not running). `duplex` keeps the request side open.
   */
  openAgentStream(orgId: string, machineId: string, req: { method: 'GET' | 'POST'; path: string; duplex: boolean }): Promise<OpenedStream>;
  callAgent(orgId: string, machineId: string, req: AgentCall): Promise<AgentAnswer>;
  /** The value of a machine's stored secret, to type by reference (never sent to a client). Throws AppError. */
  secretForTyping(orgId: string, machineId: string, name: string): Promise<string>;
  leases: GatewayLeases;
  events: GatewayEvents;
  egress: EgressMeter;
  /** Sessions a channel names (`session_id`): checked at the handshake, attached while the socket is open. */
  sessions?: {
    /** Throws AppError unless the caller may attach this session on this machine. */
    checkAttach(p: OrgPrincipal, machineId: string, sessionId: string): Promise<void>;
    /** Resolves to the detach. */
    attach(sessionId: string): Promise<() => void>;
  };
  /** Forward channels for machines another process owns (absent: serve every channel here). */
  forwarding?: GatewayForwarding;
  /** Operator log (never bodies, paths or typed text). */
  log?: LogSink;
}
