/**
 * What differs per disk format when a layer moves between hosts: what its payload is (a btrfs send stream, a
 * qcow2 file), which layer the receiver holds that it can be a delta against, and how a received payload
 * becomes the layer's blob. The source and sink (source.ts, sink.ts) are the same for both formats.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { LayerStore } from '../layer-store.js';
import type { FrameHeader, PayloadKind } from './wire.js';

/** A frame's payload ready to send: a file of known size and digest. */
export interface Payload {
  path: string;
  bytes: number;
  sha256: string;
  /** Called once the payload was sent (or abandoned): deletes a spooled file. */
  release(): Promise<void>;
}

export interface LayerCodec {
  readonly kind: PayloadKind;
  /** Sender: the layer among `present` (held by the receiver by the time this frame arrives) to send a delta against. */
  deltaBase(store: LayerStore, layerId: string, present: readonly string[]): Promise<string | null>;
  /** Sender: the frame's payload. */
  payload(store: LayerStore, layerId: string, deltaFrom: string | null): Promise<Payload>;
  /**
   * Receiver: apply a frame's payload so that the layer's blob stands at `store.blobPath(frame.layerId)`, not
   * registered. `lower` is the path the layer stands on here (its parent's blob, or the base image). Reads at
   * most the chunks given; may stop early when the payload is refused.
   */
  place(store: LayerStore, frame: FrameHeader, chunks: AsyncIterable<Buffer>, lower: string): Promise<void>;
  /** Receiver: remove whatever `place` left for a layer (a failed transfer). Never called for a registered layer. */
  discard(store: LayerStore, layerId: string): Promise<void>;
}

/** Size and SHA-256 of a file. */
export async function digestFile(file: string): Promise<{ bytes: number; sha256: string }> {
  const hash = crypto.createHash('sha256');
  let bytes = 0;
  for await (const b of fs.createReadStream(file) as AsyncIterable<Buffer>) {
    hash.update(b);
    bytes += b.length;
  }
  return { bytes, sha256: hash.digest('hex') };
}
