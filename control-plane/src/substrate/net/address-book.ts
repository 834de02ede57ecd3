/**
 * The addresses a substrate root hands its outbound machines on its bridge's subnet: those its machine records
 * hold (`used`, passed in by the driver) plus those reserved by creates still in flight. Reserving is
 * synchronous: no await between the scan and the reservation.
 */
import { allocateAddress, inSubnet, type VmNetwork } from './network.js';

export class AddressBook {
  /** Addresses handed out by creates still in flight (not yet in a machine.json). */
  private readonly reserved = new Set<string>();

  constructor(private readonly net: Pick<VmNetwork, 'subnet'>) {}

  /** A free address, held until released. */
  reserve(used: string[]): string {
    const a = allocateAddress(this.net, [...used, ...this.reserved]);
    this.reserved.add(a);
    return a;
  }

  release(address: string): void {
    this.reserved.delete(address);
  }

  /** A new address when `current` is none or outside the subnet (the network moved); null when it stands. */
  readdress(current: string | undefined, used: string[]): string | null {
    if (current && inSubnet(this.net, current)) return null;
    return allocateAddress(this.net, [...used.filter((a) => a !== current), ...this.reserved]);
  }
}
