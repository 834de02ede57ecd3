/**
 * Bringing a layer held on another host to this one before a disk is made on it (issue 25 item 4;
 * docs/substrates.md, "Moving disks between hosts"): a fork or restore onto a snapshot, a create from a template,
 * a template made from a snapshot. Where a layer is: the snapshot's or template's `host_id` (null: the deployment's
 * only host, as machines.host_id). The decisions, in order:
 *
 * | the layer's host                     | here                                                                 |
 * |--------------------------------------|----------------------------------------------------------------------|
 * | null, or this host                   | nothing moves (`local`): the caller pins it as on one host            |
 * | another, and this host holds a copy  | nothing moves (`cached`): the copy is pinned by `holder`, no call made |
 * | another, reachable                   | the chain's missing layers move (`pulled`), pinned by `holder`        |
 * | another, down (or no longer a host)  | 409 `layerOnLostHost`: the disk is on a lost host                     |
 * | another, which no longer holds it    | 409 `layerGoneFromHost`                                               |
 * | another, not reachable now           | 503 `hostCallUnreachable`, retryable                                  |
 *
 * `holder` is the snapshot's or template's id: the copy stays cached here until that row is gone, when this host's
 * pin sweep (snapshots.reconcile / sweepPins) releases it. Progress goes to the operator's log as `layer_pull`
 * lines with bytes done and total (a quarter at a time), and the outcome as `layer_pulled`.
 */
import { AppError } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';
import { silentLog, type LogSink } from '../log.js';
import type { HostRow } from '../store/repos/hosts.js';
import { readTransfer, type LayerSink } from '../substrate/disks/transfer/sink.js';
import type { Layers } from '../substrate/substrate.js';

/** Asking the host that holds a layer (cluster/layer-fetch.ts over the internal channel). */
export interface LayerFetch {
  /** `layerId`'s chain on host `hostId`, oldest first. */
  chain(hostId: string, layerId: string): Promise<string[]>;
  /** The transfer body (wire.ts) of `layerId` from host `hostId`, without what `have` names. */
  body(hostId: string, layerId: string, have: readonly string[]): Promise<AsyncIterable<Buffer>>;
}

/** Where a layer is held: its id, and the host whose store holds it (null: the deployment's only host). */
export interface HeldLayer {
  layerId: string;
  hostId: string | null;
}

export type PullOutcome = { kind: 'local' } | { kind: 'cached' } | { kind: 'pulled'; layers: number; bytes: number };

export interface LayerPullDeps {
  /** This process's host (null: no registry, every layer is here). */
  hostId: string | null;
  /** Where the layers moved to this host land (the substrate's layer store); absent: nothing can move here. */
  transfer?: { fetch: LayerFetch; sink: Pick<LayerSink, 'have' | 'receive'> } | null;
  /** This host's layer pins. */
  layers: Pick<Layers, 'pinLayer'>;
  /** A host's row (a down host's layers cannot move). */
  host(hostId: string): Promise<Pick<HostRow, 'state'> | undefined>;
  log?: LogSink;
}

export function createLayerPuller(d: LayerPullDeps) {
  const log = d.log ?? silentLog;

  /**
   * What the caller is told of a failed move: a conflict the source stated (another guest image) as it is, the
   * source not holding the layer as `layerGoneFromHost` (409: a retry cannot help); else by
   * the source host's row, down or gone is the lost-host conflict, anything else (unreachable, a stream cut short or
   * corrupted on the way: the caller sent nothing wrong) retryable. The code of the cause is in the log line.
   */
  async function explain(e: unknown, hostId: string): Promise<AppError> {
    if (e instanceof AppError && e.code === 'conflict') return e;
    if (e instanceof AppError && e.code === 'not_found') return ERRORS.layerGoneFromHost();
    const row = await d.host(hostId).catch(() => null);
    if (row === undefined || row?.state === 'down') return ERRORS.layerOnLostHost();
    return e instanceof AppError && e.code === 'compute_unavailable' ? e : ERRORS.hostCallUnreachable();
  }

  async function pull(held: HeldLayer & { hostId: string }, holder: string): Promise<PullOutcome> {
    const transfer = d.transfer;
    if (!transfer) throw ERRORS.layerTransferUnconfigured();
    const { layerId, hostId } = held;
    const started = Date.now();
    let quarter = -1;
    try {
      const have = transfer.sink.have(await transfer.fetch.chain(hostId, layerId));
      const { header, payload } = await readTransfer(await transfer.fetch.body(hostId, layerId, have));
      const got = await transfer.sink.receive(header, payload, {
        holder,
        onProgress: ({ done, total }) => {
          const q = total ? Math.floor((4 * done) / total) : 4;
          if (q === quarter) return;
          quarter = q;
          log({ event: 'layer_pull', layer: layerId, from_host: hostId, holder, done, total });
        },
      });
      log({ event: 'layer_pulled', layer: layerId, from_host: hostId, holder, layers: got.registered.length, bytes: got.bytes, ms: Date.now() - started });
      return { kind: 'pulled', layers: got.registered.length, bytes: got.bytes };
    } catch (e) {
      log({ event: 'layer_pull_failed', layer: layerId, from_host: hostId, holder, code: e instanceof AppError ? e.code : 'internal_error' });
      throw await explain(e, hostId);
    }
  }

  return {
    /**
     * Makes `held` present on this host, pinned by `holder` unless it is local (whose pins the caller keeps as
     * before). Call outside any transaction: it may move gigabytes.
     */
    async bring(held: HeldLayer, holder: string): Promise<PullOutcome> {
      if (held.hostId === null || d.hostId === null || held.hostId === d.hostId) return { kind: 'local' };
      if (d.transfer?.sink.have([held.layerId]).length) {
        await d.layers.pinLayer(held.layerId, holder);
        return { kind: 'cached' };
      }
      return pull({ ...held, hostId: held.hostId }, holder);
    },
  };
}
export type LayerPuller = ReturnType<typeof createLayerPuller>;
