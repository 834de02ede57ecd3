/**
 * Outbound-only networking for machines on a host bridge (podman's for containers, ours for VMs). Packets from
 * the bridge addressed to the host itself (any of its addresses: the bridge gateway, the host's LAN address,
 * loopback-bound services reached through them) traverse INPUT; forwarded traffic to the outside world
 * traverses FORWARD and is untouched. So one INPUT rule set on the bridge interface keeps machines away from
 * the host's own services while they keep outbound access: replies to connections the host opened are
 * accepted, everything else is dropped.
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

export async function ipt(bin: string, args: string[], allowFail = false): Promise<boolean> {
  try {
    await run(bin, args);
    return true;
  } catch (e) {
    if (allowFail) return false;
    throw e;
  }
}

/**
 * Make `chain` hold exactly `rules` (each an `-A <chain> …` argv). The chain is flushed and rebuilt only when
 * a rule is missing or a stranger was added: a flush leaves the chain empty for a moment, and every bridge
 * that jumps to it (machines already running) would be unguarded in that moment.
 */
export async function ensureChain(bin: string, chain: string, rules: string[][]): Promise<void> {
  await ipt(bin, ['-w', '-N', chain], true); // may exist
  let intact = true;
  for (const r of rules) if (!(await ipt(bin, r.map((a) => (a === '-A' ? '-C' : a)), true))) intact = false;
  if (intact) {
    const listed = (await run(bin, ['-w', '-S', chain])).stdout.split('\n').filter((l) => l.startsWith('-A '));
    if (listed.length === rules.length) return;
  }
  await ipt(bin, ['-w', '-F', chain]);
  for (const r of rules) await ipt(bin, r);
}

/**
 * Installs run one at a time in this process (both substrates install it): two interleaved rebuilds of the
 * chain could leave its DROP ahead of its ACCEPT.
 */
let installing: Promise<void> = Promise.resolve();

/** Install (idempotently) the guard for IPv4 and IPv6. */
export function installHostGuard(bridge = DEFAULT_BRIDGE): Promise<void> {
  const next = installing.then(() => install(bridge));
  installing = next.catch(() => {});
  return next;
}

async function install(bridge: string): Promise<void> {
  for (const bin of ['iptables', 'ip6tables']) {
    const rules = guardRules(bridge);
    await ensureChain(bin, GUARD_CHAIN, rules.slice(2, 4));
    // Only one jump: check before inserting.
    const present = await ipt(bin, ['-w', '-C', 'INPUT', '-i', bridge, '-j', GUARD_CHAIN], true);
    if (!present) await ipt(bin, rules[4]!, bin === 'ip6tables');
  }
}
