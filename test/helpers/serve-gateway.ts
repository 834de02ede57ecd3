/**
 * Serves a machines rig's app on 127.0.0.1:0 with the WebSocket gateway attached through
 * gatewayDepsFromServices, as main.ts does. `close` stops the gateway and the server (not the rig).
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve as honoServe } from '@hono/node-server';
import { attachGateway, type Gateway, type GatewayOptions } from '../../control-plane/src/gateway/gateway.js';
import { gatewayDepsFromServices, type FromServicesOptions } from '../../control-plane/src/gateway/from-services.js';
import type { MachinesRig } from './machines-rig.js';

export interface ServedGateway {
  server: Server;
  gateway: Gateway;
  /** ws://127.0.0.1:port */
  wsBase: string;
  close(): Promise<void>;
}

export async function serveWithGateway(rig: MachinesRig, o: { deps?: FromServicesOptions; gateway?: GatewayOptions } = {}): Promise<ServedGateway> {
  const server = await new Promise<Server>((resolve) => {
    const s = honoServe({ fetch: rig.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
  });
  const gw = gatewayDepsFromServices(rig.services, o.deps);
  const gateway = attachGateway(server, gw.deps, o.gateway);
  return {
    server,
    gateway,
    wsBase: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      await gateway.close();
      gw.close();
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}
