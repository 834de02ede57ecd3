/**
 * Terminal channel: one WebSocket ↔ one full-duplex agent attach stream. Binary messages are pty bytes,
 * passed through untouched both ways; text messages are control (resize in, exit/error out).
 * Closing the socket detaches (the pty keeps running); the pty exiting sends `exit` then closes 1000.
 */
import http2 from 'node:http2';
import { WebSocket, type RawData } from 'ws';
import { AppError } from '../../../shared/errors.js';
import { PTY_EXIT_TRAILER } from '../../../shared/agent-protocol.js';
import { CLOSE_CODES, TerminalClientMessage } from '../../../shared/schemas/gateway.js';
import { agentPath, readAgentAnswer, readAgentError, streamRequest } from '../services/machine-agent/index.js';
import type { GatewayDeps, OpenedStream } from './deps.js';
import { sendBinary, sendJson } from './send.js';

/** Pty output waiting on a slow client above this pauses the agent stream (HTTP/2 flow control takes over). */
const TERMINAL_HIGH_WATER = 1024 * 1024;

function rawToBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

function closeCodeFor(code: string): number {
  if (code === 'conflict') return CLOSE_CODES.conflict;
  if (code === 'not_found') return CLOSE_CODES.not_found;
  if (code === 'permission_denied') return CLOSE_CODES.permission_denied;
  if (code === 'compute_unavailable') return CLOSE_CODES.compute_unavailable;
  return CLOSE_CODES.internal_error;
}

export function serveTerminal(ws: WebSocket, deps: GatewayDeps, orgId: string, machineId: string, termId: string): void {
  const egress = deps.egress;
  let agent: OpenedStream | null = null;
  let wsClosed = false;
  /** Client bytes that arrived before the agent accepted the attach (bounded by the ws maxPayload per message). */
  const early: Buffer[] = [];
  let earlyBytes = 0;

  const sendError = (code: string, message: string) => sendJson(ws, egress, machineId, { type: 'error', code, message });

  ws.on('message', (data, isBinary) => {
    if (isBinary) {
      const buf = rawToBuffer(data);
      if (agent) {
        if (!agent.stream.write(buf)) {
          // The pty is not keeping up: stop reading the client until the agent stream drains.
          ws.pause();
          agent.stream.once('drain', () => ws.resume());
        }
      } else {
        early.push(buf);
        earlyBytes += buf.length;
        if (earlyBytes > 4 * 1024 * 1024) ws.close(CLOSE_CODES.internal_error, 'too much input before attach');
      }
      return;
    }
    let msg: TerminalClientMessage;
    try {
      const r = TerminalClientMessage.safeParse(JSON.parse(rawToBuffer(data).toString('utf8')));
      if (!r.success) {
        sendError('invalid_request', `Invalid message: ${r.error.issues.map((i) => `${i.path.join('.') || '(message)'}: ${i.message}`).join('; ')}`);
        return;
      }
      msg = r.data;
    } catch {
      sendError('invalid_request', 'Text messages must be JSON.');
      return;
    }
    const body = JSON.stringify({ cols: msg.cols, rows: msg.rows });
    deps.callAgent(orgId, machineId, { method: 'POST', path: agentPath('terminals.resize', { term_id: termId }), body }).then(
      (res) => {
        try {
          readAgentAnswer('terminals.resize', res);
          sendJson(ws, egress, machineId, { type: 'resized', cols: msg.cols, rows: msg.rows });
        } catch (e) {
          sendError(e instanceof AppError ? e.code : 'internal_error', e instanceof AppError ? e.message : 'The terminal refused the resize.');
        }
      },
      (e) => sendError(e instanceof AppError ? e.code : 'internal_error', e instanceof AppError ? e.message : 'The resize failed.'),
    );
  });

  ws.once('close', () => {
    wsClosed = true;
    // Detach: cancel our stream; the agent keeps the pty running.
    agent?.stream.close(http2.constants.NGHTTP2_CANCEL);
  });

  deps.openAgentStream(orgId, machineId, streamRequest('terminals.attach', { term_id: termId })).then(
    async (o) => {
      if (wsClosed) {
        o.stream.close(http2.constants.NGHTTP2_CANCEL);
        return;
      }
      if (o.status !== 200) {
        const err = await readAgentError(o, 'terminals.attach');
        ws.close(closeCodeFor(err.code), err.code === 'conflict' ? 'terminal already has a client' : err.code);
        return;
      }
      agent = o;
      for (const b of early.splice(0)) o.stream.write(b);
      let exitCode: number | null = null;
      let exited = false;
      o.stream.on('trailers', (h) => {
        exited = true;
        const v = h[PTY_EXIT_TRAILER];
        if (typeof v === 'string' && /^-?\d+$/.test(v)) exitCode = Number(v);
      });
      let paused = false;
      o.stream.on('data', (chunk: Buffer) => {
        sendBinary(ws, egress, machineId, chunk, () => {
          if (paused && ws.bufferedAmount < TERMINAL_HIGH_WATER / 2) {
            paused = false;
            o.stream.resume();
          }
        });
        if (!paused && ws.bufferedAmount > TERMINAL_HIGH_WATER) {
          paused = true;
          o.stream.pause();
        }
      });
      o.stream.once('end', () => {
        // Without the exit trailer the stream did not finish: its session went away under it (a stop, restore
        // or delete dropped the machine's connection). That is a lost stream, not an exit.
        if (!exited) {
          if (ws.readyState === WebSocket.OPEN) ws.close(CLOSE_CODES.compute_unavailable, 'terminal stream lost');
          return;
        }
        // The agent finished the answer: the pty exited. Say how, then close.
        sendJson(ws, egress, machineId, { type: 'exit', exit_code: exitCode });
        o.stream.end();
        ws.close(CLOSE_CODES.normal, 'terminal exited');
      });
      o.stream.once('close', () => {
        if (ws.readyState === WebSocket.OPEN) ws.close(CLOSE_CODES.compute_unavailable, 'terminal stream lost');
      });
    },
    (e) => {
      const code = e instanceof AppError ? e.code : 'internal_error';
      ws.close(closeCodeFor(code), code);
    },
  );
}
