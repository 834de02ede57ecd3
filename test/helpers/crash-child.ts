/**
 * A control plane in a child process for the crash drills (test/faults/): the machines rig on a data directory
 * and a container substrate root, one /v1 call, its answer on stdout. Run with COMPUTER_FAULT_POINT=<name> it
 * SIGKILLs itself at that point (control-plane/src/fault-points.ts).
 * Usage: node --import=@tapjs/typescript/import crash-child.ts '{"dir","root","rootfs","disks","key","method","path","body"}'
 */
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { makeMachinesRig } from './machines-rig.js';

const o = JSON.parse(process.argv[2] ?? '{}') as { dir: string; root: string; rootfs: string; disks?: 'auto' | 'copy'; key: string; method: string; path: string; body?: unknown };
const substrate = new ContainerSubstrate({ root: o.root, baseRootfs: o.rootfs, stopTimeoutMs: 5000, ...(o.disks ? { disks: o.disks } : {}) });
const rig = makeMachinesRig({ substrate, dir: o.dir, services: { readyProbe: false } });
const r = await rig.call(o.method, o.path, { key: o.key, ...(o.body !== undefined ? { body: o.body } : {}) });
process.stdout.write(JSON.stringify({ status: r.status, json: r.json }));
await rig.close({ keepDir: true });
