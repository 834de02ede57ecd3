/**
 * The answers a preview hostname gives on its own behalf (nothing of the guest's): an HTML page for
 * browsers, the API's error envelope for `Accept: application/json`. They never name the machine, the
 * organization or the port.
 */
import { errorBody, type AppError } from '../../../shared/errors.js';

export interface PreviewPage {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** True when the client asked for JSON rather than a page. */
export function wantsJson(accept: string | undefined): boolean {
  return !!accept && /application\/json/i.test(accept) && !/text\/html/i.test(accept);
}

/**
 * The page for `err`, under `title`. Its status is always the envelope's for the code
 * (`shared/errors.ts`): a preview with nothing answering is `503 compute_unavailable`, never a 502 that the
 * envelope's table has no code for.
 */
export function previewPage(err: AppError, title: string, requestId: string, accept: string | undefined): PreviewPage {
  const status = err.status;
  const headers: Record<string, string> = { 'cache-control': 'no-store', 'x-request-id': requestId, ...err.headers };
  if (wantsJson(accept)) {
    return { status, headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(errorBody(err, requestId)) };
  }
  // Unavailable pages retry by themselves: a dev server that is still starting appears without a click.
  const refresh = status === 503 ? '<meta http-equiv="refresh" content="5">' : '';
  const body = `<!doctype html><html><head><meta charset="utf-8"><meta name="robots" content="noindex">${refresh}<title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem;color:#222}small{color:#777}</style></head>
<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(err.message)}</p><p><small>${status} · request ${escapeHtml(requestId)}</small></p></body></html>
`;
  return { status, headers: { ...headers, 'content-type': 'text/html; charset=utf-8', 'x-frame-options': 'DENY' }, body };
}
