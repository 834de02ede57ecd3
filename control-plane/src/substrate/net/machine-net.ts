/**
 * One bridge and one IPv4 subnet per substrate root, allocated host-wide. Two control planes (or two test
 * files) on one host must never share a bridge: they would hand the same address to two machines, count each
 * other's ports, and flush each other's rules. Each root takes an index in a host-wide registry directory
 * (one file per index, created with O_EXCL: exactly one root wins an index) and keeps it in
 * `<root>/network.json` for its life, so its machines keep their addresses across control-plane restarts.
 *
 * An entry is stale when the root it names no longer exists (a deleted data directory, a finished test);
 * a stale entry is taken over by renaming it away first (of two takers exactly one rename succeeds).
 * Candidate subnets that overlap a route the host already has (a LAN, a VPN, another bridge) are skipped.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ERRORS } from '../../errors.js';

export type MachineNetKind = 'container' | 'vm';

export interface MachineNet {
  index: number;
  /** Interface name of the bridge (≤ 15 bytes). */
  bridge: string;
  /** e.g. 10.200.4.0/22 */
  subnet: string;
}

/** Where the registry lives unless configured: persistent (a root keeps its index across reboots). */
export const DEFAULT_NET_REGISTRY = '/var/lib/computer/networks';
/** 10.200.0.0/13 cut into /22s (1021 machines each): 512 substrate roots per host. */
const POOL_BASE = (10 << 24) | (200 << 16);
const SUBNET_PREFIX = 22;
export const MAX_NET_INDEX = 512;

/** The bridge and subnet of an index (pure). Containers and VMs share the index space, never a subnet. */
export function netForIndex(kind: MachineNetKind, index: number): MachineNet {
  if (!Number.isInteger(index) || index < 0 || index >= MAX_NET_INDEX) throw new Error(`machine network index out of range: ${index}`);
  const base = (POOL_BASE + index * 2 ** (32 - SUBNET_PREFIX)) >>> 0;
  const ip = [base >>> 24, (base >>> 16) & 255, (base >>> 8) & 255, base & 255].join('.');
  return { index, bridge: `computer-${kind === 'container' ? 'c' : 'v'}${index}`, subnet: `${ip}/${SUBNET_PREFIX}` };
}

/** IPv4 routes of the host as [network, prefix, interface] from /proc/net/route's text (little-endian hex fields). */
export function parseRoutes(text: string): Array<[number, number, string]> {
  const out: Array<[number, number, string]> = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8) continue;
    const le = (h: string) => (Buffer.from(h.padStart(8, '0'), 'hex').readUInt32LE(0) >>> 0);
    const dest = le(f[1]!);
    const mask = le(f[7]!);
    if (mask === 0) continue; // the default route overlaps everything and says nothing
    out.push([dest, popcount(mask), f[0]!]);
  }
  return out;
}

function popcount(x: number): number {
  let n = 0;
  for (let v = x >>> 0; v; v >>>= 1) n += v & 1;
  return n;
}

/** Whether `subnet` (a.b.c.d/p) overlaps any of `routes`. */
export function overlapsRoutes(subnet: string, routes: Array<[number, number, string?]>): boolean {
  const [ip, p] = subnet.split('/');
  const o = ip!.split('.').map(Number);
  const base = ((o[0]! << 24) | (o[1]! << 16) | (o[2]! << 8) | o[3]!) >>> 0;
  const prefix = Number(p);
  return routes.some(([net, rp]) => {
    const k = Math.min(prefix, rp);
    const mask = k === 0 ? 0 : (0xffffffff << (32 - k)) >>> 0;
    return ((base & mask) >>> 0) === ((net & mask) >>> 0);
  });
}

function hostRoutes(): Array<[number, number, string]> {
  try {
    return parseRoutes(fs.readFileSync('/proc/net/route', 'utf8'));
  } catch {
    return [];
  }
}

/** Whether the registry entry `file` belongs to a root that still exists (and still holds it). */
function entryLive(file: string, index: number): boolean {
  let owner: string;
  try {
    owner = fs.readFileSync(file, 'utf8').trim();
  } catch {
    return false;
  }
  if (!owner || !fs.existsSync(owner)) return false;
  try {
    const rec = JSON.parse(fs.readFileSync(path.join(owner, 'network.json'), 'utf8')) as { index?: number };
    // The root exists but took another index (or none yet: it is claiming this one right now).
    return rec.index === undefined || rec.index === index;
  } catch {
    return true; // claiming: network.json is written after the entry
  }
}

/** Claim index `i` for `root`: true when the entry is ours now. */
function claim(registry: string, i: number, root: string): boolean {
  const file = path.join(registry, String(i));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, root, { flag: 'wx', mode: 0o644 });
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    if (fs.readFileSync(file, 'utf8').trim() === root) return true;
    if (entryLive(file, i)) return false;
    // Stale: move it away; of two processes taking it over, only one rename succeeds.
    try {
      fs.renameSync(file, `${file}.stale-${crypto.randomBytes(6).toString('hex')}`);
    } catch {
      return false;
    }
    for (const f of fs.readdirSync(registry)) if (f.startsWith(`${i}.stale-`)) fs.rmSync(path.join(registry, f), { force: true });
  }
  return false;
}

/**
 * The machine network of a substrate root: the one it recorded, else a newly allocated one. Synchronous:
 * substrates are constructed synchronously. Throws compute_unavailable when the pool is exhausted.
 */
export function machineNetFor(opts: { root: string; kind: MachineNetKind; registry?: string }): MachineNet {
  const root = path.resolve(opts.root);
  const registry = opts.registry ?? DEFAULT_NET_REGISTRY;
  fs.mkdirSync(registry, { recursive: true, mode: 0o755 });
  const recFile = path.join(root, 'network.json');
  let recorded: number | undefined;
  try {
    recorded = (JSON.parse(fs.readFileSync(recFile, 'utf8')) as { index?: number }).index;
  } catch {
    /* first start */
  }
  // A recorded index is taken back (after a reboot, or a lost registry) unless another root holds it now.
  if (recorded !== undefined && recorded >= 0 && recorded < MAX_NET_INDEX && claim(registry, recorded, root)) return netForIndex(opts.kind, recorded);
  const routes = hostRoutes();
  for (let i = 0; i < MAX_NET_INDEX; i++) {
    const n = netForIndex(opts.kind, i);
    if (fs.existsSync(path.join(registry, String(i))) && fs.readFileSync(path.join(registry, String(i)), 'utf8').trim() !== root && entryLive(path.join(registry, String(i)), i)) continue;
    // A host route into the subnet (a LAN, a VPN, the other kind's bridge of this index) is not ours to take;
    // a bridge of this very name left by a root that is gone is (same name, same subnet: it is reused).
    if (overlapsRoutes(n.subnet, routes.filter((r) => r[2] !== n.bridge))) continue;
    if (!claim(registry, i, root)) continue;
    fs.writeFileSync(`${recFile}.tmp`, JSON.stringify({ index: i }));
    fs.renameSync(`${recFile}.tmp`, recFile);
    return n;
  }
  throw ERRORS.noFreeMachineNetwork();
}

/** Give the root's index back (the root is being removed: tests, operators). */
export function releaseMachineNet(opts: { root: string; registry?: string }): void {
  const root = path.resolve(opts.root);
  const registry = opts.registry ?? DEFAULT_NET_REGISTRY;
  try {
    const { index } = JSON.parse(fs.readFileSync(path.join(root, 'network.json'), 'utf8')) as { index: number };
    const file = path.join(registry, String(index));
    if (fs.readFileSync(file, 'utf8').trim() === root) fs.rmSync(file, { force: true });
  } catch {
    /* nothing held */
  }
}
