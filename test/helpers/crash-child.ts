/**
 * A control plane in a child process for the crash drills (test/faults/): the machines rig on a data directory
 * and a container substrate root, one /v1 call, its answer on stdout. Run with COMPUTER_FAULT_POINT=<name> it
 * SIGKILLs itself at that point (control-plane/src/fault-points.ts).
 * With `warm`, a warm pool of one per size is filled for one small create first (services/machines/warm-pool.ts),
 * so the call can take its member (or the fill itself reaches the point).
 * Usage: node --import=@tapjs/typescript/import crash-child.ts '{"dir","root","rootfs","disks","key","method","path","body","warm"}'
 */
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { makeMachinesRig } from './machines-rig.js';

const o = JSON.parse(process.argv[2] ?? '{}') as { dir: string; root: string; rootfs: string; disks?: 'auto' | 'copy'; key: string; method: string; path: string; body?: unknown; warm?: boolean };
const substrate = new ContainerSubstrate({ root: o.root, baseRootfs: o.rootfs, stopTimeoutMs: 5000, ...(o.disks ? { disks: o.disks } : {}) });
const rig = await makeMachinesRig({ substrate, dir: o.dir, services: { readyProbe: false, warmPool: { tickMs: 3_600_000 } }, env: { WARM_POOL_PER_SIZE: o.warm ? '1' : '0' } });
if (o.warm) {
  const pool = rig.services.machines.warmPool;
  pool.start();
  pool.noteDemand('small');
  for (let n = 0; !pool.ready().small?.length; n++) {
    if (n === 5) throw new Error('the pool did not fill');
    await pool.tick();
  }
}
const r = await rig.call(o.method, o.path, { key: o.key, ...(o.body !== undefined ? { body: o.body } : {}) });
process.stdout.write(JSON.stringify({ status: r.status, json: r.json }));
await rig.close({ keepDir: true });
