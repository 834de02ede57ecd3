/**
 * The container machines rig (substrate-rigs.ts) served on the real listener (API, gateway, previews) at
 * 127.0.0.1, as main.ts serves it. Gateway and preview log lines land in the rig's log, so a test can scan
 * one log for credentials. Teardown is registered on `t`. Needs root, podman and runc.
 */
import { serveWithGateway } from './serve-gateway.js';
import { containerMachinesRig } from './substrate-rigs.js';

export async function serveOnContainers(t: { teardown(fn: () => Promise<void> | void): void }, rootPrefix: string) {
  const { rig, substrate, created } = await containerMachinesRig(t, `/tmp/${rootPrefix}`);
  const served = await serveWithGateway(rig, { deps: { log: (l) => rig.logs.push(l) } });
  t.teardown(() => served.close());
  return { substrate, rig, served, created };
}
