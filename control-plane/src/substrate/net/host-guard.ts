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

function serialized(fn: () => Promise<void>): Promise<void> {
  const next = installing.then(fn);
  installing = next.catch(() => {});
  return next;
}

/** Install (idempotently) the guard for IPv4 and IPv6. */
export function installHostGuard(bridge: string): Promise<void> {
  return serialized(() => install(bridge));
}

/** A machine bridge with outbound access: its interface, its IPv4 subnet, the chain of its FORWARD rules. */
export interface OutboundBridge {
  bridge: string;
  /** e.g. 10.201.0.0/16 */
  subnet: string;
  forwardChain: string;
}

export function forwardChainName(bridge: string): string {
  return `COMPUTER-FWD-${bridge}`;
}

/** FORWARD rules of the bridge (each an iptables argv without the binary). */
export function forwardRules(n: OutboundBridge): string[][] {
  const ch = n.forwardChain;
  const br = n.bridge;
  return [
    // Machine to machine through the host's routing (a guest can route its neighbour's address via the
    // gateway), and bridged between ports where br_netfilter hands bridged IPv4 to iptables.
    ['-w', '-A', ch, '-i', br, '-o', br, '-j', 'DROP'],
    // Outbound only: the outside world gets replies, never a new connection to a machine.
    ['-w', '-A', ch, '-o', br, '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT'],
    ['-w', '-A', ch, '-o', br, '-j', 'DROP'],
    // Only the subnet's own sources leave (and get masqueraded); a guest forging other sources is dropped.
    ['-w', '-A', ch, '-i', br, '-s', n.subnet, '-j', 'ACCEPT'],
    ['-w', '-A', ch, '-i', br, '-j', 'DROP'],
  ];
}

/** The NAT rule of the bridge's subnet (an iptables argv without the binary). */
export function natRule(n: OutboundBridge): string[] {
  return ['-w', '-t', 'nat', '-A', 'POSTROUTING', '-s', n.subnet, '!', '-o', n.bridge, '-j', 'MASQUERADE'];
}

/**
 * Everything a bridge's machines need for outbound-only access, once per bridge and idempotent: the host
 * guard (INPUT), its FORWARD chain (jumped to first), NAT of its subnet, IPv4 forwarding. Host-wide
 * effect: `net.ipv4.ip_forward=1` (on a host whose FORWARD policy is ACCEPT it routes between its other
 * interfaces too).
 */
export function installOutboundRules(n: OutboundBridge): Promise<void> {
  return serialized(async () => {
    await install(n.bridge);
    await ensureChain('iptables', n.forwardChain, forwardRules(n));
    const nat = natRule(n);
    if (!(await ipt('iptables', nat.map((a) => (a === '-A' ? '-C' : a)), true))) await ipt('iptables', nat);
    if (!(await ipt('iptables', ['-w', '-C', 'FORWARD', '-j', n.forwardChain], true))) await ipt('iptables', ['-w', '-I', 'FORWARD', '1', '-j', n.forwardChain]);
    await run('sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1']);
  });
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

/** Undo installOutboundRules for one bridge: NAT rule, FORWARD jump and chain, guard jumps (tests, operators). */
export async function removeOutboundRules(n: OutboundBridge): Promise<void> {
  const nat = natRule(n).map((a) => (a === '-A' ? '-D' : a));
  while (await ipt('iptables', nat, true));
  while (await ipt('iptables', ['-w', '-D', 'FORWARD', '-j', n.forwardChain], true));
  await ipt('iptables', ['-w', '-F', n.forwardChain], true);
  await ipt('iptables', ['-w', '-X', n.forwardChain], true);
  for (const bin of ['iptables', 'ip6tables']) while (await ipt(bin, ['-w', '-D', 'INPUT', '-i', n.bridge, '-j', GUARD_CHAIN], true));
}
