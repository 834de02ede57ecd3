/**
 * Requests to preview hostnames on a listener at 127.0.0.1:port: the Host header names the preview
 * (no resolver needed for `*.localhost`).
 */
import http from 'node:http';
import { WebSocket } from 'ws';
import { WsClient } from './gateway-ws.js';

export interface PreviewReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: any;
}

/** The Host for a preview URL (`http://prv-….localhost/` → `prv-….localhost:port`). */
export function previewHost(url: string, port: number): string {
  return `${new URL(url).hostname}:${port}`;
}

export function previewRequest(
  port: number,
  host: string,
  o: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<PreviewReply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: o.method ?? 'GET', path: o.path ?? '/', headers: { host, ...o.headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: any;
        try {
          json = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

/** A streaming GET: resolves at the response headers; `waitFor` reads on as bytes arrive. */
export function previewStream(port: number, host: string, path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body(): string; ended: Promise<void>; waitFor(pred: (s: string) => boolean, what: string): Promise<string>; destroy(): void }>(
    (resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path, headers: { host, ...headers }, agent: false }, (res) => {
        let text = '';
        let done = false;
        const waiters: Array<() => void> = [];
        const wake = () => waiters.splice(0).forEach((f) => f());
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
          wake();
        });
        const ended = new Promise<void>((r) => res.once('close', () => {
          done = true;
          wake();
          r();
        }));
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: () => text,
          ended,
          destroy: () => req.destroy(),
          // A hang guard, not a timing assertion: a stream that never delivers fails instead of hanging.
          waitFor: (pred, what) =>
            new Promise<string>((ok, fail) => {
              const guard = setTimeout(() => fail(new Error(`timed out waiting for ${what}: ${JSON.stringify(text)}`)), 30_000);
              const check = () => {
                if (pred(text)) {
                  clearTimeout(guard);
                  ok(text);
                } else if (done) {
                  clearTimeout(guard);
                  fail(new Error(`stream ended before ${what}: ${JSON.stringify(text)}`));
                } else waiters.push(check);
              };
              check();
            }),
        });
      });
      req.on('error', reject);
      req.end();
    },
  );
}

/** A WebSocket to a preview host; resolves with a client or the HTTP refusal. */
export function previewSocket(port: number, host: string, path: string, headers: Record<string, string> = {}): Promise<WsClient | { status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers: { host, ...headers }, perMessageDeflate: false });
    const client = new WsClient(ws);
    ws.once('open', () => resolve(client));
    ws.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    ws.once('error', reject);
  });
}
