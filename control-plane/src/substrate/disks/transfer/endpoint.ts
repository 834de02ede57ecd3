/** One host's side of layer transfers: its layer store, the codec of its disk format, and its guest image. */
import type { LayerStore } from '../layer-store.js';
import type { LayerCodec } from './codec.js';

export interface TransferEndpoint {
  store: LayerStore;
  codec: LayerCodec;
  /**
   * The guest image at the bottom of the store's chains: its path on this host (what layer records name) and
   * its identity across hosts (the image's content hash), which the header carries instead of a path.
   */
  base: { path: string; id: string };
}

/** Progress of a transfer in bytes of payload, for a caller to show. */
export interface TransferProgress {
  done: number;
  total: number;
}
export type OnProgress = (p: TransferProgress) => void;
