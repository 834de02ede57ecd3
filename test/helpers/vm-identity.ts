/**
 * Each machine its own identity (issue 26 item 1) on the vm substrate, checked through /v1 inside the VM files
 * that already boot guests (test/e2e/machines-vm.test.ts: a create and a stop and start; test/e2e/snapshots-vm.test.ts:
 * a restore, a fork and a create from a template), so no guest is booted for identity alone. The driver records a
 * machine-id and hostname at create and puts them on the kernel command line at every boot; the image's init
 * (computer-identity) writes them. The record, not the disk, decides: guest root may rewrite the files (and a
 * snapshot may capture them that way).
 */
import type { Test } from 'tap';
import { peekRecord } from '../../control-plane/src/substrate/records.js';
import { until, type MachinesRig } from './machines-rig.js';

export interface GuestIdentity {
  machineIdFile: string;
  hostname: string;
  hostnameFile: string;
  /** `getent hosts computer`, blanks collapsed. */
  computerResolves: string;
}

/** What guest root writes over the identity files (and the hosts file) before a capture or a stop. */
export const TAMPER_IDENTITY = "echo ffffffffffffffffffffffffffffffff > /etc/machine-id; echo tampered > /etc/hostname; printf '127.0.0.1 localhost\\n' > /etc/hosts; sync";

/** Root exec in the guest, retried while its agent is not up yet (503). */
export async function rootSh(rig: MachinesRig, key: string, id: string, script: string): Promise<string> {
  return until(`exec on ${id}`, 600, async () => {
    const r = await rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['sh', '-c', script], user: 'root', timeout_ms: 60_000 } });
    if (r.status === 200) return r.json.stdout as string;
    if (r.status !== 503) throw new Error(`exec: ${r.status} ${r.text}`);
    return null;
  });
}

export async function guestIdentity(rig: MachinesRig, key: string, id: string): Promise<GuestIdentity> {
  const out = await rootSh(rig, key, id, 'cat /etc/machine-id; echo .; hostname; cat /etc/hostname; getent hosts computer');
  const [machineIdFile = '', rest = ''] = out.split('.\n');
  const [hostname = '', hostnameFile = '', computerResolves = ''] = rest.split('\n');
  return { machineIdFile, hostname, hostnameFile, computerResolves: computerResolves.replace(/\s+/g, ' ') };
}

/**
 * Reads the guest's identity and asserts it is valid (32 lowercase hex and a newline; hostname `computer-` and the
 * first 12 hex) and exactly what the driver recorded for the machine under `root` (files, running hostname, and
 * `computer` as an alias of 127.0.1.1).
 */
export async function assertOwnIdentity(t: Test, rig: MachinesRig, root: string, key: string, id: string, what: string): Promise<GuestIdentity> {
  const got = await guestIdentity(rig, key, id);
  t.match(got.machineIdFile, /^[0-9a-f]{32}\n$/, `${what}: a valid machine-id, 32 lowercase hex and a newline`);
  t.equal(got.hostname, `computer-${got.machineIdFile.slice(0, 12)}`, `${what}: hostname computer- and the first 12 hex of the machine-id`);
  const rec = peekRecord<{ identity?: { machineId: string; hostname: string } }>(root, id)?.identity;
  t.ok(rec, `${what}: the driver recorded an identity`);
  t.same(got, {
    machineIdFile: `${rec?.machineId}\n`,
    hostname: rec?.hostname,
    hostnameFile: rec?.hostname,
    computerResolves: `127.0.1.1 ${rec?.hostname} computer`,
  }, `${what}: the guest's machine-id, hostname and hosts are its record's`);
  return got;
}
