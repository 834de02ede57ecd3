/**
 * A TLS terminator on 127.0.0.1 in front of a plain-http listener, as a deployment puts one in front of
 * the control plane: a throwaway self-signed certificate (made by openssl, for `*.<domain>`) and each
 * decrypted connection piped to the target port, Host header untouched. Browsers reach it with
 * `--host-resolver-rules` and accept its certificate with `ignoreHTTPSErrors`.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { relay } from './tcp-proxy.js';

export interface TlsTerminator {
  port: number;
  close(): Promise<void>;
}

export async function tlsTerminator(targetPort: number, names: string[]): Promise<TlsTerminator> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tls-term-'));
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${names[0]}`,
    '-addext', `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`, '-keyout', key, '-out', cert,
  ], { stdio: 'ignore' });
  const open = new Set<net.Socket>();
  const server = tls.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (client) => relay(client, targetPort, open));
  server.on('tlsClientError', () => {});
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
