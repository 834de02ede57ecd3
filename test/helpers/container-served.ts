/**
 * The end-to-end stand-up on the container substrate: the real guest image (built on first use), a
 * machines rig over ContainerSubstrate, and the real listener (API, gateway, previews) on 127.0.0.1.
 * Teardown (registered on `t`) closes the listener, destroys every machine in `created`, and removes
 * the substrate's root. Needs root, podman and runc.
 */
import fs from 'node:fs';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { makeMachinesRig } from './machines-rig.js';
import { serveWithGateway } from './serve-gateway.js';
import { testImage } from './substrate-image.js';

export async function serveOnContainers(t: { teardown(fn: () => Promise<void>): void }, rootPrefix: string) {
  const image = await testImage('container');
  // Short root: unix socket paths are limited to 107 bytes.
  const root = fs.mkdtempSync(`/tmp/${rootPrefix}`);
  const substrate = new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000 });
  const rig = makeMachinesRig({ substrate, services: { agentTimeouts: { connectMs: 5000, requestMs: 60_000 } } });
  // Gateway and preview log lines land in the rig's log, so a test can scan one log for credentials.
  const served = await serveWithGateway(rig, { deps: { log: (l) => rig.logs.push(l) } });
  const created: string[] = [];
  t.teardown(async () => {
    await served.close();
    for (const id of created) await substrate.destroy(id).catch(() => {});
    await rig.close();
    await substrate.releaseMounts();
    fs.rmSync(root, { recursive: true, force: true });
  });
  return { substrate, rig, served, created };
}
