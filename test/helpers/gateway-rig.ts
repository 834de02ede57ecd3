/**
 * Gateway rig: the real control plane (app + services over real SQLite) served on 127.0.0.1:0 with the
 * gateway attached through gatewayDepsFromServices, and one running machine whose agent is the REAL
 * agent (desktop on a real Xvfb, ptys, exec) reached through the fake substrate's channel.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import type { Test } from 'tap';
import { createAgentApp } from '../../agent/src/app.js';
import { createAgentServer } from '../../agent/src/channel/server.js';
import { createDesktop, type Desktop } from '../../agent/src/desktop/desktop.js';
import { createPtyManager } from '../../agent/src/pty/manager.js';
import { desktopRoutes } from '../../agent/src/routes/desktop.js';
import { execRoutes } from '../../agent/src/routes/exec.js';
import { terminalsRoutes } from '../../agent/src/routes/terminals.js';
import type { Gateway, GatewayOptions } from '../../control-plane/src/gateway/gateway.js';
import { EgressCounter } from '../../control-plane/src/gateway/send.js';
import type { LogLine } from '../../control-plane/src/log.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { makeMachinesRig, type MachinesRig } from './machines-rig.js';
import { serveWithGateway } from './serve-gateway.js';
import { startXvfb, type TestDisplay } from './xvfb.js';
import { Enrollment } from '../../agent/src/enrollment.js';

export interface GatewayRig {
  rig: MachinesRig;
  sub: FakeSubstrate;
  xvfb: TestDisplay;
  desktop: Desktop;
  gateway: Gateway;
  egress: EgressCounter;
  /** The HTTP port the control plane (and the dashboard, if asked for) listens on. */
  port: number;
  /** Everything the gateway logged. */
  gatewayLogs: LogLine[];
  /** ws://127.0.0.1:port */
  wsBase: string;
  tenant: Awaited<ReturnType<MachinesRig['tenant']>>;
  machineId: string;
  /** /v1 call as the tenant's key. */
  api(method: string, p: string, body?: unknown, headers?: Record<string, string>): ReturnType<MachinesRig['call']>;
  auth: Record<string, string>;
  /** Wait until the machine's desktop answers up through /v1. */
  desktopUp(): Promise<{ width: number; height: number }>;
}

/** `dashboardDir`: also serve the built dashboard (test/helpers/dashboard.ts `builtDashboard`). */
export async function startGatewayRig(t: Test, opts: { gateway?: GatewayOptions; xvfb?: { width: number; height: number }; dashboardDir?: string } = {}): Promise<GatewayRig> {
  const xvfb = await startXvfb(opts.xvfb);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-rig-'));
  const desktop = await createDesktop({ display: xvfb.display, fbdir: xvfb.fbdir, log: () => {}, browser: { command: 'chromium', sandbox: false, userName: 'agent' } });
  const ptys = createPtyManager({ display: xvfb.display });
  let agentServer: ReturnType<typeof createAgentServer> | null = null;
  // The agent starts when the control plane first dials the machine, as in a guest, and is enrolled then.
  const sub: FakeSubstrate = new FakeSubstrate({
    channelHandler: (id: string, end: Duplex) => {
      if (!agentServer) {
        const app = createAgentApp({ enrollment: new Enrollment({ kind: 'channel' }), log: () => {}, mounts: [desktopRoutes(desktop), execRoutes({ display: xvfb.display }), terminalsRoutes(ptys)] });
        agentServer = createAgentServer(app, () => {});
      }
      agentServer.emit('connection', end);
    },
  });
  const rig = await makeMachinesRig({ substrate: sub, services: { readyProbe: false }, ...(opts.dashboardDir ? { dashboardDir: opts.dashboardDir } : {}) });
  const egress = new EgressCounter();
  const gatewayLogs: LogLine[] = [];
  const served = await serveWithGateway(rig, { deps: { egress, log: (l) => gatewayLogs.push(l) }, gateway: opts.gateway });
  const gateway = served.gateway;
  t.teardown(async () => {
    await served.close();
    await rig.close();
    agentServer?.close();
    ptys.closeAll();
    desktop.close();
    await xvfb.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const tenant = await rig.tenant('developer');
  const m = await rig.call('POST', '/v1/machines', { key: tenant.key, body: { name: 'gw' } });
  if (m.status !== 201 && m.status !== 200) throw new Error(`machine create ${m.status} ${m.text}`);
  const machineId = m.json.id as string;
  const api: GatewayRig['api'] = (method, p, body, headers) => rig.call(method, p, { key: tenant.key, body, headers });
  return {
    rig, sub, xvfb, desktop, gateway, egress, gatewayLogs, tenant, machineId, api,
    port: served.port,
    wsBase: served.wsBase,
    auth: { authorization: `Bearer ${tenant.key}` },
    async desktopUp() {
      for (let i = 0; i < 200; i++) {
        const r = await api('GET', `/v1/machines/${machineId}/display`);
        if (r.status === 200 && r.json.up) return { width: r.json.width, height: r.json.height };
        await new Promise((res) => setTimeout(res, 50));
      }
      throw new Error('desktop never came up');
    },
  };
}
