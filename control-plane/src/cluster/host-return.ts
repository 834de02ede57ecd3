/**
 * What a host driver's work does first at each takeover (cluster/host-driver.ts `DriverWork.start`; the lead wires
 * it into serve): hold the takeover's fence, so every machine state write of this process carries it from now on
 * (services/host-fence.ts), then settle what a loss of this host left: machines failed with `host_lost` whose disks
 * are here come back `stopped` (services/machines/host-loss.ts). Before the reconcile and the substrate watch.
 */
import type { LogSink } from '../log.js';
import type { Services } from '../services/index.js';
import type { HostFence } from '../store/repos/hosts.js';

export async function beginDriving(services: Pick<Services, 'hostFence' | 'machines'>, fence: HostFence, log: LogSink): Promise<void> {
  services.hostFence.hold(fence);
  const settled = await services.machines.recoverAfterHostLoss(fence);
  if (settled.length) {
    log({
      event: 'host.returned', host: fence.hostId, epoch: fence.epoch,
      stopped: settled.filter((s) => s.to === 'stopped').length, still_error: settled.filter((s) => s.to === 'error').length,
    });
  }
}
