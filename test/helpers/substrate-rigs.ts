/**
 * The machines rig on a real substrate, with its teardown: a short temp root (unix socket paths are limited to
 * 107 bytes), the guest image, and every machine the test created destroyed at the end.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { CATALOG } from '../../control-plane/src/domain/catalog.js';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { VmSubstrate } from '../../control-plane/src/substrate/vm/driver.js';
import type { ServiceDeps } from '../../control-plane/src/services/index.js';
import { makeMachinesRig, type MachinesRig, type MachinesRigOptions } from './machines-rig.js';
import { testImage } from './substrate-image.js';

interface Teardown {
  teardown(fn: () => Promise<void> | void): void;
}

export async function containerMachinesRig(
  t: Teardown,
  prefix = '/tmp/cpe-',
  services: Partial<ServiceDeps> = {},
  rigOptions: Pick<MachinesRigOptions, 'dashboardDir' | 'env'> = {},
  /** `rootTmpfs`: the root on a tmpfs of this size (`512m`), so the disk volume's backing filesystem can fill. */
  substrateOptions: { rootTmpfs?: string; volumeBytes?: number } = {},
): Promise<{ rig: MachinesRig; substrate: ContainerSubstrate; root: string; created: string[] }> {
  const image = await testImage('container');
  const root = fs.mkdtempSync(prefix);
  if (substrateOptions.rootTmpfs) execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${substrateOptions.rootTmpfs},mode=0700`, 'tmpfs', root]);
  const substrate = new ContainerSubstrate({
    root, baseRootfs: image.rootfs, stopTimeoutMs: 5000, ...(substrateOptions.volumeBytes ? { volumeBytes: substrateOptions.volumeBytes } : {}),
  });
  const rig = await makeMachinesRig({ ...rigOptions, substrate, services: { agentTimeouts: { connectMs: 5000, requestMs: 60_000 }, ...services } });
  const created: string[] = [];
  t.teardown(async () => {
    for (const id of created) await substrate.destroy(id).catch(() => {});
    await rig.close();
    await substrate.releaseMounts();
    fs.rmSync(root, { recursive: true, force: true });
  });
  return { rig, substrate, root, created };
}

/** The catalog's small size shrunk so a TCG guest fits the host. */
export async function vmMachinesRig(t: Teardown, prefix = '/tmp/cpv-'): Promise<{ rig: MachinesRig; substrate: VmSubstrate; root: string; created: string[] }> {
  const image = await testImage('all');
  const root = fs.mkdtempSync(prefix);
  const substrate = new VmSubstrate({ root, kernel: image.kernel, initrd: image.initrd, baseDisk: image.baseDisk, stopTimeoutMs: 60_000 });
  const catalog = [{ ...CATALOG[0]!, sizes: CATALOG[0]!.sizes.map((s) => (s.id === 'small' ? { ...s, vcpu: 2, memory_mb: 2048, disk_gb: 6 } : s)) }];
  const rig = await makeMachinesRig({ substrate, services: { catalog, agentTimeouts: { connectMs: 10_000, requestMs: 120_000 } } });
  const created: string[] = [];
  t.teardown(async () => {
    for (const id of created) await substrate.destroy(id).catch(() => {});
    await rig.close();
    await substrate.removeNetwork();
    fs.rmSync(root, { recursive: true, force: true });
  });
  return { rig, substrate, root, created };
}
