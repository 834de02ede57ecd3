/**
 * Outbound-only networking for containers on podman's bridge. Packets from the bridge addressed to the host
 * itself (any of its addresses: the bridge gateway, the host's LAN address, loopback-bound services reached
 * through them) traverse INPUT; forwarded traffic to the outside world traverses FORWARD and is untouched.
 * So one INPUT rule set on the bridge interface keeps machines away from the host's own services while they
 * keep outbound access: replies to connections the host opened are accepted, everything else is dropped.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const GUARD_CHAIN = 'COMPUTER-GUARD';
/** podman's default CNI bridge. */
export const DEFAULT_BRIDGE = 'cni-podman0';

/** The iptables invocations (without the binary) that install the guard; pure for a pinned test. */
export function guardRules(bridge: string): string[][] {
  return [
    ['-w', '-N', GUARD_CHAIN],
    ['-w', '-F', GUARD_CHAIN],
    ['-w', '-A', GUARD_CHAIN, '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT'],
    ['-w', '-A', GUARD_CHAIN, '-j', 'DROP'],
    ['-w', '-I', 'INPUT', '1', '-i', bridge, '-j', GUARD_CHAIN],
  ];
}

async function ipt(bin: string, args: string[], allowFail = false): Promise<boolean> {
  try {
    await run(bin, args);
    return true;
  } catch (e) {
    if (allowFail) return false;
    throw e;
  }
}

/** Install (idempotently) the guard for IPv4 and IPv6. */
export async function installHostGuard(bridge = DEFAULT_BRIDGE): Promise<void> {
  for (const bin of ['iptables', 'ip6tables']) {
    const rules = guardRules(bridge);
    await ipt(bin, rules[0]!, true); // chain may exist
    for (const r of rules.slice(1, 4)) await ipt(bin, r);
    // Only one jump: check before inserting.
    const present = await ipt(bin, ['-w', '-C', 'INPUT', '-i', bridge, '-j', GUARD_CHAIN], true);
    if (!present) await ipt(bin, rules[4]!, bin === 'ip6tables');
  }
}
