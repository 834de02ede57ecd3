/**
 * A preview host's refusals and how they are written: the error (its code decides the status, as in the
 * envelope) with a page title, sent as a page on a response or as raw HTTP/1.1 bytes on an upgrade's socket.
 */
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AppError } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';
import type { AdmissionRefusal } from './admission.js';
import { previewPage, type PreviewPage } from './pages.js';

const REASONS: Record<number, string> = { 400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 500: 'Internal Server Error', 503: 'Service Unavailable' };

/** A preview host's own answer: the error (its code decides the status, as in the envelope) and a page title. */
export type Refusal = { err: AppError; title: string };

export function refusal(err: AppError, title: string): Refusal {
  return { err, title };
}

const UNAVAILABLE = 'The machine is not available';
const NOTHING = 'Nothing is answering yet';
export const NOT_FOUND = () => refusal(ERRORS.noSuchPreview(), 'No such preview');
export const PRIVATE = (err = ERRORS.previewPrivate()) => refusal(err, 'This preview is private');
export const STOPPED = () => refusal(ERRORS.previewMachineNotRunning(), UNAVAILABLE);
export const UNREACHABLE = () => refusal(ERRORS.previewMachineUnreachable(), UNAVAILABLE);
export const NOTHING_LISTENING = () => refusal(ERRORS.previewNothingListening(), NOTHING);
export const NO_ANSWER = () => refusal(ERRORS.previewNoAnswer(), NOTHING);
/** The process that drives the machine's host is unknown or gone (cluster/forward/owner.ts). */
export const OWNER_AWAY = (err: AppError) => refusal(err, UNAVAILABLE);

export const BUSY: Record<AdmissionRefusal, () => Refusal> = {
  machine: () => refusal(ERRORS.previewMachineBusy(), 'This preview is busy'),
  budget: () => refusal(ERRORS.previewBudgetBusy(), 'This preview is busy'),
};

/** An HTTP/1.1 response head as bytes (an upgrade's socket has no ServerResponse). */
export function rawResponse(status: number, reason: string, headers: Array<[string, string]>): string {
  return `HTTP/1.1 ${status} ${reason}\r\n${headers.map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`;
}

/** Node's flat raw-header list as name/value pairs. */
export function pairs(flat: readonly string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!]);
  return out;
}

/** The refusal's page on a response (or a cut connection when the guest's head already went out). */
export function sendPage(res: ServerResponse, r: Refusal, requestId: string, accept: string | undefined): number {
  const p: PreviewPage = previewPage(r.err, r.title, requestId, accept);
  if (res.headersSent) {
    res.destroy();
    return p.status;
  }
  res.writeHead(p.status, p.headers);
  res.end(p.body);
  return p.status;
}

/** The refusal's page written raw on an upgrade's socket, which is then closed. */
export function writeRawPage(socket: Duplex, r: Refusal, requestId: string, accept: string | undefined): void {
  const p = previewPage(r.err, r.title, requestId, accept);
  const head = rawResponse(p.status, REASONS[p.status] ?? 'Error', [
    ...Object.entries(p.headers),
    ['content-length', String(Buffer.byteLength(p.body))],
    ['connection', 'close'],
  ]);
  if (socket.writable) socket.end(head + p.body);
  socket.destroy();
}
