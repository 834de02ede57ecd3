/**
 * Who may reach a preview: its host resolved to a live preview, the caller's credential checked against the
 * preview's visibility, and the one-shot access link traded for a host-only cookie. Every refusal is decided
 * here, before any guest byte moves.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ERRORS } from '../errors.js';
import { PREVIEW_COOKIE } from '../../../shared/schemas/ports.js';
import { previewIdFromHost } from '../domain/preview-hostnames.js';
import type { PortService } from '../services/ports.js';
import type { PreviewRow } from '../store/repos/previews.js';
import { NOT_FOUND, PRIVATE, sendPage, type Refusal } from './refusals.js';

export type Admitted = { row: PreviewRow; dropAuthorization: boolean };

export async function lookup(ports: PortService, req: IncomingMessage): Promise<PreviewRow | null> {
  const id = previewIdFromHost(req.headers.host, ports.domain);
  return id ? ports.resolve(id) : null;
}

/** Host → live preview → credential. */
export async function admit(ports: PortService, req: IncomingMessage): Promise<Admitted | Refusal> {
  const row = await lookup(ports, req);
  if (!row) return NOT_FOUND();
  const cred = ports.authorize(row, { authorization: req.headers.authorization, cookie: req.headers.cookie, origin: req.headers.origin });
  if (!cred.ok) return PRIVATE();
  return { row, dropAuthorization: cred.dropAuthorization };
}

/**
 * The one-shot access link: trade the token for a cookie on this hostname only, then go to `/`. A
 * browser that already holds a valid credential is just sent on.
 */
export async function access(ports: PortService, secureCookies: boolean, req: IncomingMessage, res: ServerResponse, row: PreviewRow, requestId: string): Promise<number> {
  const token = new URL(req.url ?? '/', 'http://preview').searchParams.get('token') ?? '';
  const cookie = req.method === 'GET' || req.method === 'HEAD' ? await ports.trade(row, token) : null;
  const headers: Record<string, string> = { location: '/', 'cache-control': 'no-store', 'referrer-policy': 'no-referrer', 'x-request-id': requestId };
  if (cookie) {
    // Host-only (no Domain): the cookie goes to this one preview hostname and nowhere else.
    headers['set-cookie'] = `${PREVIEW_COOKIE}=${cookie}; Path=/; HttpOnly; SameSite=Lax${secureCookies ? '; Secure' : ''}`;
  } else if (!ports.authorize(row, { cookie: req.headers.cookie, origin: req.headers.origin }).ok) {
    return sendPage(
      res,
      PRIVATE(ERRORS.previewAccessLinkInvalid()),
      requestId,
      req.headers.accept,
    );
  }
  res.writeHead(303, headers);
  res.end();
  return 303;
}
