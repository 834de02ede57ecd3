/**
 * Outbound networking for VMs: a host bridge owned by us, one tap per running machine, a static IPv4 address
 * per machine (recorded in its machine.json, passed to the guest on the kernel command line), NAT to the
 * outside, and the same INPUT guard as containers so a machine never reaches the host's own services.
 *
 * This module is pure (addresses, names, the host commands as argv lists) and pinned by test; host-net.ts runs it.
 */
import crypto from 'node:crypto';
import { forwardChainName, type OutboundBridge } from './host-guard.js';
import { ERRORS } from '../../errors.js';

export const DEFAULT_VM_BRIDGE = 'computer-br0';
export const DEFAULT_VM_SUBNET = '10.201.0.0/16';
/** resolv.conf reads at most three nameservers. */
const MAX_DNS = 3;

export interface VmNetworkConfig {
  /** Host bridge the machines' taps join (created if missing). Default computer-br0. */
  bridge?: string;
  /** IPv4 subnet of the bridge; the gateway (the host, on the bridge) is its first address. Default 10.201.0.0/16. */
  subnet?: string;
  /** Nameservers for the guests. Default: the host's own, minus loopback and host addresses (unreachable). */
  dns?: string[];
}

export interface VmNetwork extends OutboundBridge {
  bridge: string;
  /** Normalized, e.g. 10.201.0.0/16. */
  subnet: string;
  prefix: number;
  gateway: string;
  dns: string[];
  /** iptables chain holding the bridge's FORWARD rules. */
  forwardChain: string;
}

/** What QEMU and the guest need for one machine's NIC. */
export interface VmNic {
  tap: string;
  mac: string;
  /** The machine's address (no prefix). */
  address: string;
  prefix: number;
  gateway: string;
  dns: string[];
}

export function ipToInt(ip: string): number | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (!m) return null;
  const o = m.slice(1).map(Number);
  if (o.some((x) => x > 255)) return null;
  return ((o[0]! << 24) | (o[1]! << 16) | (o[2]! << 8) | o[3]!) >>> 0;
}

export function intToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

function parseCidr(cidr: string): { base: number; prefix: number } | null {
  const m = /^([\d.]+)\/(\d{1,2})$/.exec(cidr);
  if (!m) return null;
  const ip = ipToInt(m[1]!);
  const prefix = Number(m[2]);
  if (ip === null || prefix > 32) return null;
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { base: (ip & mask) >>> 0, prefix };
}

function isLoopback(ip: string): boolean {
  return (ipToInt(ip) ?? 0) >>> 24 === 127;
}

/** IPv4 nameservers from a resolv.conf text. */
export function resolvConfNameservers(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    if (m && ipToInt(m[1]!) !== null) out.push(m[1]!);
  }
  return out;
}

/**
 * Validate the operator's network settings and fill in defaults. `hostDns` are the host's nameservers and
 * `hostAddresses` its own IPv4 addresses: the guard drops guest traffic to the host itself, so a nameserver on
 * the host (127.0.0.53, a dnsmasq on the LAN address) would never answer a guest and is left out.
 */
export function resolveVmNetwork(cfg: VmNetworkConfig | undefined, hostDns: string[], hostAddresses: string[]): VmNetwork {
  const bridge = cfg?.bridge ?? DEFAULT_VM_BRIDGE;
  // Interface names are at most 15 bytes; no dots, which sysctl keys would read as separators.
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,14}$/.test(bridge)) throw new Error(`vm network: bad bridge name ${JSON.stringify(bridge)}`);
  const subnetText = cfg?.subnet ?? DEFAULT_VM_SUBNET;
  const c = parseCidr(subnetText);
  // At least a /28: the network, gateway and broadcast addresses leave room for machines.
  if (!c || c.prefix < 8 || c.prefix > 28) throw new Error(`vm network: bad subnet ${JSON.stringify(subnetText)} (IPv4 CIDR, /8 to /28)`);
  const gateway = intToIp(c.base + 1);
  const local = new Set([...hostAddresses, gateway]);
  let dns: string[];
  if (cfg?.dns) {
    for (const d of cfg.dns) if (ipToInt(d) === null) throw new Error(`vm network: bad nameserver ${JSON.stringify(d)} (IPv4 only)`);
    dns = [...cfg.dns];
  } else dns = hostDns.filter((d) => !isLoopback(d) && !local.has(d));
  return {
    bridge,
    subnet: `${intToIp(c.base)}/${c.prefix}`,
    prefix: c.prefix,
    gateway,
    dns: [...new Set(dns)].slice(0, MAX_DNS),
    forwardChain: forwardChainName(bridge),
  };
}

export function inSubnet(n: Pick<VmNetwork, 'subnet'>, ip: string): boolean {
  const c = parseCidr(n.subnet)!;
  const x = ipToInt(ip);
  if (x === null) return false;
  const size = 2 ** (32 - c.prefix);
  // Neither the network address, the gateway, nor the broadcast address.
  return x >= c.base + 2 && x <= c.base + size - 2;
}

/** The lowest free machine address of the subnet; `used` are the addresses other machines hold. */
export function allocateAddress(n: Pick<VmNetwork, 'subnet'>, used: Iterable<string>): string {
  const taken = new Set(used);
  const c = parseCidr(n.subnet)!;
  const size = 2 ** (32 - c.prefix);
  for (let x = c.base + 2; x <= c.base + size - 2; x++) {
    const ip = intToIp(x);
    if (!taken.has(ip)) return ip;
  }
  throw ERRORS.noFreeMachineAddress();
}

/**
 * The machine's tap device: `ctap` + 10 hex digits (interface names are at most 15 bytes). `scope` (the
 * substrate's root) keeps two substrates with the same machine ids from sharing a name.
 */
export function tapName(scope: string, id: string): string {
  return `ctap${crypto.createHash('sha256').update(`${scope}\0${id}`).digest('hex').slice(0, 10)}`;
}

/**
 * A locally administered unicast MAC (52:54 prefix, like QEMU's) carrying the machine's IPv4 address: stable
 * for the machine's life (the address is recorded) and, unlike a hash of the id, never shared by two ports
 * of the bridge.
 */
export function macFor(address: string): string {
  const x = ipToInt(address);
  if (x === null) throw new Error('macFor: not an IPv4 address');
  return ['52', '54', ...[x >>> 24, (x >>> 16) & 255, (x >>> 8) & 255, x & 255].map((o) => o.toString(16).padStart(2, '0'))].join(':');
}

export function nicFor(n: VmNetwork, scope: string, id: string, address: string): VmNic {
  return { tap: tapName(scope, id), mac: macFor(address), address, prefix: n.prefix, gateway: n.gateway, dns: n.dns };
}

/** Kernel command line arguments the guest's init reads (see images/rootfs/usr/sbin/computer-init). */
export function kernelNetArgs(nic: VmNic): string[] {
  return [`computer.net=${nic.address}/${nic.prefix},${nic.gateway}`, ...(nic.dns.length ? [`computer.dns=${nic.dns.join(',')}`] : [])];
}

/** One host command; skipped when `unless` succeeds (already in place); `optional` failures are ignored. */
export interface NetStep {
  argv: string[];
  unless?: string[];
  optional?: boolean;
}

/**
 * The bridge, in order: created down, IPv6 off on it, guarded, forwarding and NAT rules, and only then an
 * address and up — no moment where a tap on it reaches the host unguarded. The guard, the forward chain,
 * NAT and IPv4 forwarding (installOutboundRules) go between `before` and `after`; see host-net.ts.
 */
export function bridgeSteps(n: VmNetwork): { before: NetStep[]; after: NetStep[] } {
  const br = n.bridge;
  return {
    before: [
      { argv: ['ip', 'link', 'add', br, 'type', 'bridge'], unless: ['ip', 'link', 'show', 'dev', br] },
      // Guests get no IPv6 address: without one on the bridge the host has no IPv6 face toward them at all.
      { argv: ['sysctl', '-q', '-w', `net.ipv6.conf.${br}.disable_ipv6=1`], optional: true },
    ],
    after: [
      { argv: ['ip', 'addr', 'replace', `${n.gateway}/${n.prefix}`, 'dev', br] },
      { argv: ['ip', 'link', 'set', 'dev', br, 'up'] },
    ],
  };
}

/** ebtables chain of one bridge port (ebtables chain names: at most 31 bytes). */
export function portGuardChain(port: string): string {
  return `COMPUTER-${port}`;
}

/**
 * Anti-spoofing for one bridge port (ebtables argv lists, without the binary): only frames from the machine's
 * own MAC carrying IPv4 from its own address, or ARP for that pair, pass; everything else from the port
 * (forged addresses, IPv6, VLAN tags, other ethertypes) is dropped. Without it a guest with raw sockets could
 * answer ARP for a neighbour's address and take the neighbour's return traffic.
 *
 * In the nat table's PREROUTING, the first bridge hook: the bridge learns a frame's source MAC (its forwarding
 * database) before the filter table's INPUT and FORWARD run, so a forged source MAC dropped only there would
 * still have taught the bridge to send the neighbour's frames to this port.
 */
export function portGuardRules(port: string, mac: string, address: string): string[][] {
  const ch = portGuardChain(port);
  return [
    ['-t', 'nat', '-N', ch],
    ['-t', 'nat', '-A', ch, '-s', mac, '-p', 'IPv4', '--ip-src', address, '-j', 'RETURN'],
    ['-t', 'nat', '-A', ch, '-s', mac, '-p', 'ARP', '--arp-mac-src', mac, '--arp-ip-src', address, '-j', 'RETURN'],
    ['-t', 'nat', '-A', ch, '-j', 'DROP'],
    ['-t', 'nat', '-A', 'PREROUTING', '-i', port, '-j', ch],
  ];
}

/**
 * The same guard as one `ebtables-restore --noflush` input (one process, applied atomically): for a container's
 * port, which is guarded on the start path after CNI made it.
 */
export function portGuardRestore(port: string, mac: string, address: string): string {
  const rules = portGuardRules(port, mac, address);
  return ['*nat', `:${portGuardChain(port)} RETURN`, ...rules.slice(1).map((r) => r.slice(2).join(' ')), 'COMMIT', ''].join('\n');
}

/**
 * A machine's tap, attached to the bridge as an isolated port (no L2 path to other machines), its port guard
 * in place before it is up.
 */
export function tapUpSteps(tap: string, bridge: string, nic: { mac: string; address: string }): NetStep[] {
  return [
    { argv: ['ip', 'tuntap', 'add', 'dev', tap, 'mode', 'tap'] },
    ...portGuardRules(tap, nic.mac, nic.address).map((r) => ({ argv: ['ebtables', ...r] })),
    { argv: ['ip', 'link', 'set', 'dev', tap, 'master', bridge] },
    { argv: ['bridge', 'link', 'set', 'dev', tap, 'isolated', 'on'] },
    { argv: ['ip', 'link', 'set', 'dev', tap, 'up'] },
  ];
}
