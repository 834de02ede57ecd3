/**
 * A VM root's outbound network: the bridge its machines' taps join (the root's own from the host-wide
 * registry, unless the operator configured one), the host's nameservers and addresses it is resolved against,
 * the addresses its machines hold, and each machine's tap. The bridge, NAT and guard are made once per
 * process (again if the bridge disappeared); a tap is never attached before the guard is in place.
 */
import fs from 'node:fs';
import os from 'node:os';
import { IpHostNet, type HostNet } from './host-net.js';
import { machineNetFor, releaseMachineNet } from './machine-net.js';
import { AddressBook } from './address-book.js';
import { nicFor, resolvConfNameservers, resolveVmNetwork, tapName, type VmNetwork, type VmNetworkConfig } from './network.js';

export class VmBridge {
  readonly network: VmNetwork;
  private readonly hostNet: HostNet;
  /** Whether the bridge is this root's own allocation (remove may delete it) or the operator's. */
  private readonly ownNetwork: boolean;
  private bridgeReady: Promise<void> | null = null;
  /** Its machines' addresses (those of creates in flight reserved). */
  readonly addresses: AddressBook;

  constructor(private readonly at: { root: string; network?: VmNetworkConfig; registry?: string; hostNet?: HostNet }) {
    let hostDns: string[] = [];
    try {
      hostDns = resolvConfNameservers(fs.readFileSync('/etc/resolv.conf', 'utf8'));
    } catch {
      /* no resolv.conf: no default nameservers */
    }
    const hostAddrs = Object.values(os.networkInterfaces()).flatMap((l) => (l ?? []).filter((a) => a.family === 'IPv4').map((a) => a.address));
    // Two roots on one bridge would hand out the same addresses: unless the operator chose, allocate host-wide.
    const own = at.network?.bridge || at.network?.subnet ? null : machineNetFor({ root: at.root, kind: 'vm', ...(at.registry ? { registry: at.registry } : {}) });
    this.ownNetwork = own !== null;
    this.network = resolveVmNetwork(own ? { ...at.network, bridge: own.bridge, subnet: own.subnet } : at.network, hostDns, hostAddrs);
    this.addresses = new AddressBook(this.network);
    this.hostNet = at.hostNet ?? new IpHostNet();
  }

  /** The machine's tap device name (whether or not it exists). */
  tapName(id: string): string {
    return tapName(this.at.root, id);
  }

  /** The bridge, NAT and guard (once per process, again if the bridge disappeared), then the machine's tap on it. */
  async addTap(id: string, address: string): Promise<void> {
    if (this.bridgeReady && !fs.existsSync(`/sys/class/net/${this.network.bridge}`)) this.bridgeReady = null;
    this.bridgeReady ??= this.hostNet.ensureBridge(this.network).catch((e) => {
      this.bridgeReady = null;
      throw e;
    });
    await this.bridgeReady;
    await this.hostNet.addTap(nicFor(this.network, this.at.root, id, address), this.network.bridge);
  }

  removeTap(id: string): Promise<void> {
    return this.hostNet.removeTap(this.tapName(id));
  }

  tapExists(id: string): boolean {
    return this.hostNet.tapExists(this.tapName(id));
  }

  /** Give the root's own bridge and subnet back (its machines destroyed first); an operator's is left alone. */
  async remove(): Promise<void> {
    if (!this.ownNetwork) return;
    await this.hostNet.removeBridge(this.network);
    this.bridgeReady = null;
    releaseMachineNet({ root: this.at.root, ...(this.at.registry ? { registry: this.at.registry } : {}) });
  }
}
