/**
 * The guest side of one proxied connection: one agent TCP stream (`POST /tcp/:port/connect`) to
 * 127.0.0.1:port in the guest, and the request head the guest gets on it.
 */
import type { IncomingMessage } from 'node:http';
import http2 from 'node:http2';
import { AppError } from '../../../shared/errors.js';
import { callerAddress } from '../cluster/forward/caller.js';
import { requestHeadersForGuest } from '../domain/preview-headers.js';
import { streamRequest, type AgentTarget, type OpenedStream } from '../services/machine-agent/index.js';
import type { PreviewRow } from '../store/repos/previews.js';
import type { PreviewProxyDeps } from './deps.js';
import { framingOf, requestHead, type BodyFraming } from './guest-request.js';
import { NOTHING_LISTENING, STOPPED, UNREACHABLE, type Refusal } from './refusals.js';

export type Dialed = { stream: http2.ClientHttp2Stream; machineId: string };

/** The guest-side connection: one agent stream to the published port. */
export async function dial(deps: PreviewProxyDeps, row: PreviewRow): Promise<Dialed | Refusal> {
  let target: AgentTarget;
  try {
    target = await deps.agentTarget(row.org_id, row.machine_id);
  } catch (e) {
    if (e instanceof AppError && (e.code === 'conflict' || e.code === 'compute_unavailable' || e.code === 'not_found')) return STOPPED();
    throw e;
  }
  let opened: OpenedStream;
  try {
    opened = await deps.openStream(target, streamRequest('tcp.connect', { port: row.port }));
  } catch {
    return UNREACHABLE();
  }
  if (opened.status !== 200) {
    // The agent's refusal (nothing listening, too many connections) is small; nothing of it is shown.
    opened.stream.close(http2.constants.NGHTTP2_CANCEL);
    return NOTHING_LISTENING();
  }
  return { stream: opened.stream, machineId: target.id };
}

/** The visitor as the guest learns it (X-Forwarded-For, -Proto, -Host): where it arrived, whichever process dials. */
export interface Visitor {
  ip: string;
  proto: 'http' | 'https';
  host: string;
}

/** The visitor of a request that arrived at this process. */
export function visitorOf(deps: PreviewProxyDeps, req: IncomingMessage): Visitor {
  return { ip: callerAddress(req, deps.trustProxy), proto: deps.secureCookies ? 'https' : 'http', host: req.headers.host ?? '' };
}

/** The request head for the guest: the client's request line and the forwarded headers, as bytes. */
export function guestHead(req: IncomingMessage, upgrade: boolean, dropAuthorization: boolean, visitor: Visitor): { head: Buffer; framing: BodyFraming } {
  const headers = requestHeadersForGuest(req.rawHeaders, {
    dropAuthorization,
    upgrade,
    forwarded: { for: visitor.ip, proto: visitor.proto, host: visitor.host },
  });
  return { head: requestHead(req.method ?? 'GET', req.url ?? '/', headers), framing: framingOf(headers) };
}
