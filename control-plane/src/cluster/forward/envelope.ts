/**
 * The channel's own answers, in the spec's error envelope: on a response not yet started, or on a raw socket
 * (an upgrade nobody answered yet). Each closes the connection: the request's body may still be arriving.
 */
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorBody, type AppError } from '../../../../shared/errors.js';

function answer(err: AppError, requestId: string): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify(errorBody(err, requestId));
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'x-request-id': requestId,
      connection: 'close',
      ...err.headers,
    },
  };
}

export function sendError(res: ServerResponse, err: AppError, requestId: string): void {
  const a = answer(err, requestId);
  res.writeHead(err.status, a.headers);
  res.end(a.body);
}

export function refuseSocket(socket: Duplex, err: AppError, requestId: string): void {
  const a = answer(err, requestId);
  const head = [`HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}`, ...Object.entries(a.headers).map(([k, v]) => `${k}: ${v}`)];
  if (socket.writable) socket.end(`${head.join('\r\n')}\r\n\r\n${a.body}`, () => socket.destroy());
  else socket.destroy();
}
