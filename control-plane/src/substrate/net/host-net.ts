/**
 * The host side of VM networking: runs the commands network.ts describes (ip, bridge, sysctl, iptables).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { installOutboundRules, ipt, removeOutboundRules } from './host-guard.js';
import { bridgeSteps, portGuardChain, portGuardRestore, tapUpSteps, type NetStep, type VmNetwork, type VmNic } from './network.js';
import { ERRORS } from '../../errors.js';

const run = promisify(execFile);

/** The host side of VM networking (an interface so the driver's logic can run against a fake). */
export interface HostNet {
  /** Idempotent; after it, taps on the bridge are NATed outbound and guarded from the host. */
  ensureBridge(n: VmNetwork): Promise<void>;
  /** The machine's tap on the bridge: isolated port, anti-spoofing guard, up. */
  addTap(nic: VmNic, bridge: string): Promise<void>;
  /** Removes the tap (if it exists) and its port guard. */
  removeTap(tap: string): Promise<void>;
  tapExists(tap: string): boolean;
  /** Undo ensureBridge (the taps gone): rules and bridge. */
  removeBridge(n: VmNetwork): Promise<void>;
}

async function runSteps(steps: NetStep[]): Promise<void> {
  for (const s of steps) {
    if (s.unless && (await ipt(s.unless[0]!, s.unless.slice(1), true))) continue;
    await ipt(s.argv[0]!, s.argv.slice(1), s.optional === true);
  }
}

export class IpHostNet implements HostNet {
  async ensureBridge(n: VmNetwork): Promise<void> {
    try {
      const { before, after } = bridgeSteps(n);
      await runSteps(before);
      await installOutboundRules(n);
      await runSteps(after);
    } catch (e) {
      throw ERRORS.vmNetworkSetupFailed(e);
    }
  }

  async addTap(nic: VmNic, bridge: string): Promise<void> {
    // A tap left by a QEMU that died while the control plane was away.
    await this.removeTap(nic.tap);
    try {
      await runSteps(tapUpSteps(nic.tap, bridge, nic));
    } catch (e) {
      await this.removeTap(nic.tap);
      throw ERRORS.vmTapSetupFailed(e);
    }
  }

  async removeTap(tap: string): Promise<void> {
    if (this.tapExists(tap)) await run('ip', ['link', 'del', 'dev', tap]).catch(() => {});
    await removePortGuard(tap);
  }

  tapExists(tap: string): boolean {
    return fs.existsSync(`/sys/class/net/${tap}`);
  }

  removeBridge(n: VmNetwork): Promise<void> {
    return removeVmNetwork(n);
  }
}

/** Remove one port's ebtables guard (all of it that exists). */
export async function removePortGuard(port: string): Promise<void> {
  const ch = portGuardChain(port);
  while (await ipt('ebtables', ['-t', 'nat', '-D', 'PREROUTING', '-i', port, '-j', ch], true));
  if (await ipt('ebtables', ['-t', 'nat', '-F', ch], true)) await ipt('ebtables', ['-t', 'nat', '-X', ch], true);
  // Guards installed by earlier versions in the filter table's INPUT and FORWARD.
  for (const hook of ['INPUT', 'FORWARD']) while (await ipt('ebtables', ['-D', hook, '-i', port, '-j', ch], true));
  if (await ipt('ebtables', ['-F', ch], true)) await ipt('ebtables', ['-X', ch], true);
}

/**
 * Guard a bridge port that already exists (a container's veth, made by CNI): only the machine's own MAC with
 * its own IPv4 address, or ARP for that pair, passes in from it (the same guard as a VM tap).
 */
export async function guardPort(port: string, mac: string, address: string): Promise<void> {
  // One ebtables process on the start path; a chain left by an earlier port of that name is cleared first.
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await restore(portGuardRestore(port, mac, address));
      return;
    } catch (e) {
      await removePortGuard(port);
      if (attempt === 1) throw ERRORS.portGuardSetupFailed(e);
    }
  }
}

function restore(input: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = execFile('ebtables-restore', ['--noflush'], (e) => (e ? reject(e) : resolve()));
    p.stdin?.end(input);
  });
}

/** Remove a bridge interface (if it exists). */
export async function removeBridge(bridge: string): Promise<void> {
  await run('ip', ['link', 'del', 'dev', bridge]).catch(() => {});
}

/**
 * Undo ensureBridge for one bridge (taps must be gone): its outbound rules and the bridge itself. The shared
 * guard chain stays (other bridges jump to it). For tests and operators.
 */
export async function removeVmNetwork(n: VmNetwork): Promise<void> {
  await removeOutboundRules(n);
  await removeBridge(n.bridge);
}
