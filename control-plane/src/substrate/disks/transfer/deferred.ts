/**
 * This host's side of layer transfers as `npm start` has it (main.ts): the endpoint arrives once the substrate is
 * prepared (the guest image built: machine-host.ts `DeferredSubstrate.transfer`). The source (what other hosts pull
 * from here, internal-layers.ts) and the sink (what this host pulls, services/layer-pull.ts) are made on first use,
 * not at start: their constructors clear the store's spool and incoming directories, which only the process driving
 * the host may touch (other processes on the same DATA_DIR forward to it and never call these).
 *
 * | the endpoint           | a call                                                   |
 * |------------------------|----------------------------------------------------------|
 * | not known yet          | 503 `hostPreparing`, retryable                           |
 * | none (no btrfs, fake)  | 503 `layerTransferUnconfigured`: layers cannot move here  |
 * | known                  | the source's or sink's answer                            |
 */
import { ERRORS } from '../../../errors.js';
import type { TransferEndpoint } from './endpoint.js';
import { LayerSink } from './sink.js';
import { LayerSource } from './source.js';

type Ends = { source: LayerSource; sink: LayerSink };

export class DeferredTransfer implements Pick<LayerSource, 'export' | 'missing'>, Pick<LayerSink, 'have' | 'receive'> {
  private endpoint: TransferEndpoint | null | undefined = undefined;
  private made: Ends | null = null;

  constructor(endpoint: Promise<TransferEndpoint | null>) {
    endpoint.then(
      (ep) => (this.endpoint = ep),
      () => (this.endpoint = null),
    );
  }

  private ends(): Ends {
    if (this.made) return this.made;
    if (this.endpoint === undefined) throw ERRORS.hostPreparing();
    if (this.endpoint === null) throw ERRORS.layerTransferUnconfigured();
    this.made = { source: new LayerSource(this.endpoint), sink: new LayerSink(this.endpoint) };
    return this.made;
  }

  missing: LayerSource['missing'] = (...a) => this.ends().source.missing(...a);
  export: LayerSource['export'] = async (...a) => this.ends().source.export(...a);
  have: LayerSink['have'] = (...a) => this.ends().sink.have(...a);
  receive: LayerSink['receive'] = async (...a) => this.ends().sink.receive(...a);
}
