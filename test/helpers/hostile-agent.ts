/**
 * A hostile agent: what a tenant's guest root can put on the channel after killing the real agent. A
 * real HTTP/2 server on a unix socket (as the real agent is reached in a container) that answers every
 * route with a chosen misbehaviour; `connect` pipes a channel's guest end to it.
 */
import fs from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';

export type Misbehaviour =
  | 'not_json' // 200 with a body that is not JSON
  | 'wrong_shape' // 200 with JSON that is not the route's response
  | 'oversize' // 200 with a body far beyond any answer's bound
  | 'trickle' // 200 headers, then a byte now and then, never the end
  | 'silent' // accepts the stream and never answers
  | 'fake_quota' // 402 quota_exceeded envelope (a code the agent may not use)
  | 'status_mismatch' // 400 with a compute_unavailable envelope
  | 'html_500' // 500 with a non-envelope body
  | 'screen_negative' // a screen frame header with a negative length
  | 'screen_nan'; // a screen frame header with a non-numeric length

export interface HostileAgent {
  /** Misbehaviour per agent path (without query); `fallback` for the rest. */
  plan: Map<string, Misbehaviour>;
  fallback: Misbehaviour;
  /** Streams the agent has seen (to prove requests reached it). */
  seen: string[];
  connect(guestEnd: Duplex): void;
  close(): Promise<void>;
}

function frameHeader(header: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(json.length, 0);
  return Buffer.concat([len, json]);
}

export async function startHostileAgent(): Promise<HostileAgent> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-agent-'));
  const sock = path.join(dir, 'agent.sock');
  const timers = new Set<NodeJS.Timeout>();
  const sockets = new Set<net.Socket>();
  const server = http2.createServer();
  const agent: HostileAgent = {
    plan: new Map(),
    fallback: 'not_json',
    seen: [],
    connect(guestEnd) {
      const s = net.connect(sock);
      sockets.add(s);
      s.on('error', () => guestEnd.destroy());
      guestEnd.on('error', () => s.destroy());
      s.pipe(guestEnd).pipe(s);
      s.once('close', () => sockets.delete(s));
    },
    async close() {
      for (const t of timers) clearInterval(t);
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  server.on('stream', (stream, headers) => {
    const p = String(headers[':path'] ?? '').split('?')[0]!;
    agent.seen.push(p);
    stream.on('error', () => {});
    const how = agent.plan.get(p) ?? agent.fallback;
    const json = (status: number, body: unknown) => {
      stream.respond({ ':status': status, 'content-type': 'application/json' });
      stream.end(typeof body === 'string' ? body : JSON.stringify(body));
    };
    // A replacement agent takes any enrollment (it wants the key) unless its plan says otherwise.
    if (p === '/auth/enroll' && !agent.plan.has(p)) {
      stream.respond({ ':status': 204 });
      stream.end();
      return;
    }
    switch (how) {
      case 'not_json':
        return json(200, '<html>owned</html>');
      case 'wrong_shape':
        return json(200, { width: 'wide', up: 'yes', image: 5, stdout: 7 });
      case 'oversize': {
        stream.respond({ ':status': 200, 'content-type': 'application/json' });
        const chunk = Buffer.alloc(64 * 1024, 0x61);
        let sent = 0;
        const more = () => {
          while (sent < 8 * 1024 * 1024 && !stream.destroyed) {
            sent += chunk.length;
            if (!stream.write(chunk)) return void stream.once('drain', more);
          }
          if (!stream.destroyed) stream.end();
        };
        return more();
      }
      case 'trickle': {
        stream.respond({ ':status': 200, 'content-type': 'application/json' });
        stream.write('{"entries":[');
        const t = setInterval(() => (stream.destroyed ? clearInterval(t) : stream.write(' ')), 50);
        timers.add(t);
        return;
      }
      case 'silent':
        return;
      case 'fake_quota':
        return json(402, { error: { code: 'quota_exceeded', message: 'pay the guest', request_id: 'x', details: [], quota: null } });
      case 'status_mismatch':
        return json(400, { error: { code: 'compute_unavailable', message: 'confused', request_id: 'x', details: [], quota: null } });
      case 'html_500':
        return json(500, 'Internal Server Error at /root/secret');
      case 'screen_negative':
      case 'screen_nan': {
        stream.respond({ ':status': 200, 'content-type': 'application/octet-stream' });
        stream.write(frameHeader({ type: 'status', up: true, width: 1280, height: 800, bytes: 0 }));
        const h = { type: 'frame', seq: 0, format: 'jpeg', width: 1280, height: 800, captured_at: 1, bytes: how === 'screen_nan' ? 'NaN' : -30 };
        stream.write(frameHeader(h));
        return;
      }
    }
  });
  await new Promise<void>((r) => server.listen(sock, () => r()));
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  return agent;
}
