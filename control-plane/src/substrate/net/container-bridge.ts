/**
 * A container root's outbound network: its own bridge and subnet (allocated host-wide: no other root or
 * control plane shares them), the host rules that keep machines on it off the host's own services, the
 * addresses its machines hold, and the guard of each machine's bridge port. Machines on one bridge must not
 * reach each other: every port of the bridge (each container's veth) is an isolated port, which has no L2 path
 * to another isolated port. CNI's bridge plugin cannot set it, so it is set after each start (sysfs, no
 * process); the bridge's FORWARD chain already drops what br_netfilter hands to iptables in the meantime.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ERRORS } from '../../errors.js';
import { forwardChainName, installOutboundRules, removeOutboundRules, type OutboundBridge } from './host-guard.js';
import { guardPort, removeBridge, removePortGuard } from './host-net.js';
import { machineNetFor, releaseMachineNet, type MachineNet } from './machine-net.js';
import { AddressBook } from './address-book.js';
import { macFor } from './network.js';

function bridgePorts(bridge: string): string[] {
  try {
    return fs.readdirSync(`/sys/class/net/${bridge}/brif`);
  } catch {
    return [];
  }
}

function isolateBridgePorts(bridge: string): void {
  const dir = `/sys/class/net/${bridge}/brif`;
  for (const p of bridgePorts(bridge)) {
    try {
      if (fs.readFileSync(path.join(dir, p, 'isolated'), 'utf8').trim() !== '1') fs.writeFileSync(path.join(dir, p, 'isolated'), '1');
    } catch {
      /* the port went away */
    }
  }
}

export class ContainerBridge {
  /** This root's own bridge and subnet. */
  readonly net: MachineNet;
  /** The bridge's host rules, installed once per process before the first outbound start. */
  private outboundRules: Promise<void> | null = null;
  /** Outbound starts one at a time: the port a start adds to the bridge is told apart from the others by that. */
  private portLock: Promise<unknown> = Promise.resolve();
  /** Its machines' addresses (those of creates in flight reserved). */
  readonly addresses: AddressBook;

  constructor(private readonly at: { root: string; registry?: string }) {
    this.net = machineNetFor({ root: at.root, kind: 'container', ...(at.registry ? { registry: at.registry } : {}) });
    this.addresses = new AddressBook(this.net);
  }

  private outboundBridge(): OutboundBridge {
    return { bridge: this.net.bridge, subnet: this.net.subnet, forwardChain: forwardChainName(this.net.bridge) };
  }

  /** The bridge is never used without the guard that keeps machines off the host's own services. */
  ensureRules(): Promise<void> {
    this.outboundRules ??= installOutboundRules(this.outboundBridge()).catch((e) => {
      this.outboundRules = null;
      throw ERRORS.networkSetupFailed(e);
    });
    return this.outboundRules;
  }

  /**
   * Start an outbound machine (`start`) and guard its bridge port: only its own MAC and address in (as a VM's
   * tap), so a guest cannot answer ARP for a neighbour's address or forge a neighbour's source. CNI makes the
   * port (a veth with a random name) inside `podman start`; starts run one at a time per root, and this root's
   * bridge is its own, so the port that appeared during this start is this machine's. Returns that port; a
   * start whose port cannot be told or guarded is stopped (`stopNow`) and fails.
   */
  startGuarded(address: string, oldPort: string | undefined, start: () => Promise<void>, stopNow: () => Promise<unknown>): Promise<string> {
    const next = this.portLock.then(async () => {
      const before = new Set(bridgePorts(this.net.bridge));
      if (oldPort) await removePortGuard(oldPort);
      await start();
      const added = bridgePorts(this.net.bridge).filter((p) => !before.has(p));
      if (added.length !== 1) {
        await stopNow();
        throw ERRORS.bridgePortUnknown();
      }
      const port = added[0]!;
      try {
        await guardPort(port, macFor(address), address);
      } catch (e) {
        await stopNow();
        throw e;
      }
      isolateBridgePorts(this.net.bridge);
      return port;
    });
    this.portLock = next.catch(() => {});
    return next;
  }

  /** Give the network back (its machines destroyed first): host rules, the bridge, the registry entry. */
  async remove(): Promise<void> {
    await removeOutboundRules(this.outboundBridge());
    await removeBridge(this.net.bridge);
    releaseMachineNet({ root: this.at.root, ...(this.at.registry ? { registry: this.at.registry } : {}) });
    this.outboundRules = null;
  }
}
