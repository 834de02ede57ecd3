/**
 * Serves a machines rig's app on 127.0.0.1:0 as main.ts does: one listener with the WebSocket gateway
 * attached through gatewayDepsFromServices and the preview hostnames (domain `localhost` by default).
 * `close` stops the gateway, the previews and the server (not the rig).
 */
import type { Server } from 'node:http';
import { attachGateway, type Gateway, type GatewayOptions } from '../../control-plane/src/gateway/gateway.js';
import { gatewayDepsFromServices, type FromServicesOptions } from '../../control-plane/src/gateway/from-services.js';
import type { EgressMeter } from '../../control-plane/src/gateway/deps.js';
import { createHttpServer } from '../../control-plane/src/http-server.js';
import { listen } from '../../control-plane/src/listen.js';
import { previewProxyFromServices, type PreviewsFromServicesOptions } from '../../control-plane/src/previews/from-services.js';
import type { PreviewProxy } from '../../control-plane/src/previews/proxy.js';
import type { MachinesRig } from './machines-rig.js';

export interface ServedGateway {
  server: Server;
  gateway: Gateway;
  /** null when the rig's configuration turns previews off. */
  previews: PreviewProxy | null;
  egress: EgressMeter;
  port: number;
  /** ws://127.0.0.1:port */
  wsBase: string;
  close(): Promise<void>;
}

export async function serveWithGateway(
  rig: MachinesRig,
  o: { deps?: FromServicesOptions; gateway?: GatewayOptions; previews?: Partial<PreviewsFromServicesOptions> } = {},
): Promise<ServedGateway> {
  const gw = gatewayDepsFromServices(rig.services, o.deps);
  const previews = previewProxyFromServices(rig.services, { egress: gw.egress, log: o.deps?.log, ...o.previews });
  const server = createHttpServer(rig.app.fetch, previews);
  const port = await listen(server, 0, '127.0.0.1');
  const gateway = attachGateway(server, gw.deps, { ...o.gateway, skip: (req) => previews?.owns(req) ?? false });
  return {
    server,
    gateway,
    previews,
    egress: gw.egress,
    port,
    wsBase: `ws://127.0.0.1:${port}`,
    async close() {
      await gateway.close();
      gw.close();
      previews?.close();
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}
