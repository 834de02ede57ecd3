/**
 * An owner process for the forward's tests (forward-rig.ts): its internal listener on 127.0.0.1 serves a WebSocket
 * that greets with the asserted principal's organization and echoes every message, text or binary. Prints
 * `{"port":N}` once listening. Arguments: the deployment key (hex) and the process id.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { DeploymentKey } from '../../control-plane/src/cluster/forward/key.js';
import { createInternalServer } from '../../control-plane/src/cluster/forward/listener.js';

const [keyHex, processId] = process.argv.slice(2);
const wss = new WebSocketServer({ noServer: true });
const server = createInternalServer({
  key: new DeploymentKey(Buffer.from(keyHex!, 'hex')),
  processId: processId!,
  handlers: {
    request: (_req, res: http.ServerResponse) => res.end('owner child'),
    upgrade: (req, socket, head, f) =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.send(JSON.stringify({ hello: f.on_behalf_of.kind === 'tenant' ? f.on_behalf_of.principal.org_id : f.on_behalf_of.preview_id }));
        ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
      }),
  },
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`));
