/**
 * Byte-level ends for preview tests. `rawGuest`: a TCP listener standing in for the app in the machine
 * (reached through the agent's real TCP stream route) that records every byte of each request it receives
 * and answers with what the test gives. `rawExchange`: a client sending exact bytes to a preview host and
 * reading the whole answer (it sends `Connection: close`, so the control plane closes after it).
 */
import type { Hono } from 'hono';
import net from 'node:net';
import type { Test } from 'tap';
import type { AgentEnv } from '../../agent/src/app.js';
import { fakeSubstrateWithAgents } from './machines-fake-agent.js';
import { makeMachinesRig } from './machines-rig.js';
import { previewHost } from './preview-client.js';
import { serveWithGateway } from './serve-gateway.js';

export interface RawGuest {
  port: number;
  /** Each connection's bytes, once its request was complete (head, then the body its framing says). */
  received: Buffer[];
  /** Connections that closed so far. */
  closed(): number;
  close(): Promise<void>;
}

/** Where the request in `buf` ends, or -1 while incomplete (Content-Length, chunked to `0\r\n\r\n`, or none). */
function requestEnd(buf: Buffer): number {
  const headEnd = buf.indexOf('\r\n\r\n');
  if (headEnd < 0) return -1;
  const head = buf.subarray(0, headEnd).toString('latin1');
  const bodyStart = headEnd + 4;
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
    const end = buf.indexOf('\r\n0\r\n\r\n', bodyStart - 2);
    return end < 0 ? -1 : end + 7;
  }
  const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  const total = bodyStart + (cl ? Number(cl[1]) : 0);
  return buf.length >= total ? total : -1;
}

/**
 * `answer(request)`: the raw bytes to send back once the request is complete (null: say nothing, keep
 * open); `early(head)`: bytes to answer with as soon as the head is in, without reading the body (null: wait).
 */
export async function rawGuest(answer: (request: Buffer) => Buffer | string | null, early: (head: string) => string | null = () => null): Promise<RawGuest> {
  const received: Buffer[] = [];
  const open = new Set<net.Socket>();
  let closed = 0;
  const server = net.createServer((sock) => {
    open.add(sock);
    sock.on('close', () => {
      open.delete(sock);
      closed++;
    });
    sock.on('error', () => {});
    let buf = Buffer.alloc(0);
    let done = false;
    sock.on('data', (d: Buffer) => {
      if (done) return;
      buf = Buffer.concat([buf, d]);
      const headEnd = buf.indexOf('\r\n\r\n');
      const first = headEnd < 0 ? null : early(buf.subarray(0, headEnd).toString('latin1'));
      if (first !== null) {
        done = true;
        return void sock.end(first);
      }
      const end = requestEnd(buf);
      if (end < 0) return;
      done = true;
      received.push(buf);
      const a = answer(buf.subarray(0, end));
      if (a !== null) sock.end(a);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    received,
    closed: () => closed,
    close: () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Sends `request` (as given, in `parts` written one after another) to 127.0.0.1:port and resolves with everything the server sent. */
export function rawExchange(port: number, parts: Array<Buffer | string>): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    sock.on('data', (d: Buffer) => chunks.push(d));
    sock.on('error', reject);
    sock.on('close', () => resolve(Buffer.concat(chunks)));
    sock.once('connect', () => {
      const next = (i: number): void => {
        if (i >= parts.length) return;
        sock.write(parts[i]!, () => setImmediate(() => next(i + 1)));
      };
      next(0);
    });
  });
}

/** A strict decoder of a chunked body (the test's own, not the proxy's): the payload, or throws. */
export function dechunk(body: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', at);
    if (eol < 0) throw new Error('chunk size line');
    const size = Number.parseInt(body.subarray(at, eol).toString('latin1'), 16);
    if (!Number.isFinite(size)) throw new Error('chunk size');
    at = eol + 2;
    if (size === 0) {
      if (body.subarray(at).toString('latin1') !== '\r\n') throw new Error('chunked end');
      return Buffer.concat(out);
    }
    out.push(body.subarray(at, at + size));
    at += size;
    if (body.subarray(at, at + 2).toString('latin1') !== '\r\n') throw new Error('chunk end');
    at += 2;
  }
}

/**
 * A public preview of a raw guest listener, on a fake-substrate rig served as main.ts serves it (its
 * agents real, `mountsFirst` route groups ahead of theirs); all torn down with the test.
 */
export async function publicPreviewOf(
  t: Test,
  answer: Parameters<typeof rawGuest>[0],
  o: { early?: Parameters<typeof rawGuest>[1]; mountsFirst?: () => Hono<AgentEnv>[] } = {},
) {
  const fake = fakeSubstrateWithAgents({ mountsFirst: o.mountsFirst });
  const rig = await makeMachinesRig({ substrate: fake.substrate });
  const served = await serveWithGateway(rig);
  const guest = await rawGuest(answer, o.early);
  t.teardown(async () => {
    await guest.close();
    await served.close();
    fake.close();
    await rig.close();
  });
  const a = await rig.tenant('developer', ['machines:read', 'machines:write', 'ports:write']);
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const pv = (await rig.call('POST', `/v1/machines/${m.id}/ports`, { key: a.key, body: { port: guest.port, access: 'public' } })).json;
  return { served, guest, host: previewHost(pv.url, served.port) };
}
