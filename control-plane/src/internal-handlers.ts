/**
 * What the internal listener (cluster/forward/listener.ts) hands a forwarded request or upgrade to: the
 * counterpart of http-server.ts for what other processes of the deployment admitted and forwarded here
 * (docs/cluster.md). By whom the signed assertion says it acts for, and what it is:
 *
 * | on behalf of | request                         | upgrade                            |
 * |--------------|---------------------------------|------------------------------------|
 * | tenant       | the API (`api`, its principal)  | the gateway's channel (`gateway`)  |
 * | preview      | the preview proxy (`previews`)  | the preview proxy (`previews`)     |
 *
 * Nothing here authenticates: the assertion is the principal (or the admitted preview), and the arriving process
 * kept the caller's credential, its Origin rule, the preview's credential and the access link. A part this
 * process does not run answers 503 (`machineOwnerUnreachable`): processes of one deployment run the same parts.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { refuseSocket, sendError } from './cluster/forward/envelope.js';
import type { Forwarded, InternalHandlers } from './cluster/forward/listener.js';
import type { OrgPrincipal } from './context.js';
import { ERRORS } from './errors.js';
import type { Gateway } from './gateway/gateway.js';
import { silentLog, type LogSink } from './log.js';
import type { ForwardedVisitor } from './previews/deps.js';
import type { PreviewProxy } from './previews/proxy.js';

export interface InternalParts {
  /** A /v1 request forwarded for a tenant, served by the API as `principal` (wired with the API's forward). */
  api?: (req: IncomingMessage, res: ServerResponse, f: Forwarded, principal: OrgPrincipal) => void;
  gateway?: Pick<Gateway, 'serveForwarded'> | null;
  previews?: Pick<PreviewProxy, 'serveForwarded' | 'upgradeForwarded'> | null;
  log?: LogSink;
}

function visitorOf(f: Forwarded, previewId: string): ForwardedVisitor {
  return { previewId, requestId: f.request_id, client: f.client };
}

export function internalHandlers(p: InternalParts): InternalHandlers {
  const log = p.log ?? silentLog;
  const unserved = (f: Forwarded, what: 'request' | 'upgrade') =>
    log({ event: 'forward_unserved', sender: f.sender, request_id: f.request_id, on_behalf_of: f.on_behalf_of.kind, what });
  return {
    request(req, res, f) {
      const who = f.on_behalf_of;
      if (who.kind === 'preview' && p.previews) return p.previews.serveForwarded(req, res, visitorOf(f, who.preview_id));
      if (who.kind === 'tenant' && p.api) return p.api(req, res, f, who.principal);
      unserved(f, 'request');
      sendError(res, ERRORS.machineOwnerUnreachable(), f.request_id);
    },
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, f: Forwarded) {
      const who = f.on_behalf_of;
      if (who.kind === 'preview' && p.previews) return p.previews.upgradeForwarded(req, socket, head, visitorOf(f, who.preview_id));
      if (who.kind === 'tenant' && p.gateway) return p.gateway.serveForwarded(req, socket, head, who.principal, f.request_id);
      unserved(f, 'upgrade');
      refuseSocket(socket, ERRORS.machineOwnerUnreachable(), f.request_id);
    },
  };
}
