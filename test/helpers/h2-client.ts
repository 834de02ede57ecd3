/** A small HTTP/2 client over a unix socket, the way the control plane talks to an agent. */
import http2 from 'node:http2';
import net from 'node:net';

export interface H2Response {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  json(): any;
}

export class H2Client {
  readonly session: http2.ClientHttp2Session;
  constructor(socketPath: string, private token: string | null) {
    this.session = http2.connect('http://agent', { createConnection: () => net.connect(socketPath) });
    this.session.on('error', () => {});
  }

  request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<H2Response> {
    return new Promise((resolve, reject) => {
      // Given headers win over the client's own token (an enrollment presents another proof).
      const h: http2.OutgoingHttpHeaders = { ':method': method, ':path': path };
      if (this.token !== null) h.authorization = `Bearer ${this.token}`;
      Object.assign(h, headers);
      let payload: Buffer | undefined;
      if (body !== undefined) {
        payload = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
        h['content-type'] = 'application/json';
      }
      const req = this.session.request(h, { endStream: payload === undefined });
      const chunks: Buffer[] = [];
      let resHeaders: http2.IncomingHttpHeaders = {};
      req.on('response', (hs) => (resHeaders = hs));
      req.on('data', (d: Buffer) => chunks.push(d));
      req.on('end', () => {
        const buf = Buffer.concat(chunks);
        resolve({
          status: Number(resHeaders[':status']),
          headers: resHeaders,
          body: buf,
          json: () => JSON.parse(buf.toString('utf8')),
        });
      });
      req.on('error', reject);
      if (payload !== undefined) req.end(payload);
    });
  }

  /** Graceful (open streams may finish); at once when the agent already ended the connection. */
  close(): Promise<void> {
    if (this.session.destroyed) return Promise.resolve();
    return new Promise((r) => this.session.close(() => r()));
  }
}
