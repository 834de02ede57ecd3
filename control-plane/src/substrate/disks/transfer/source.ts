/**
 * The sending side of a layer transfer: `(layerId, have) => header + body`. Of the layer's chain (top down to
 * the base) only the layers above the first one the receiver has are sent, oldest first, each as a delta
 * against a layer the receiver will hold when the codec finds one. Nothing is sent when the receiver has the
 * layer already (the body is the header alone). The body is what goes over the internal channel: the header,
 * then each frame's payload; progress counts payload bytes read out of it.
 */
import fs from 'node:fs';
import { Readable } from 'node:stream';
import { ERRORS } from '../../../errors.js';
import type { Payload } from './codec.js';
import type { OnProgress, TransferEndpoint } from './endpoint.js';
import { spoolDir } from './btrfs-codec.js';
import { encodeHeader, totalBytes, type FrameHeader, type TransferHeader } from './wire.js';

export interface ExportedLayer {
  header: TransferHeader;
  /** The HTTP body: header, then the payloads. Spooled payloads are deleted once it ends or is destroyed. */
  body: Readable;
  /** The body's length (Content-Length). */
  bodyBytes: number;
}

export class LayerSource {
  constructor(private readonly ep: TransferEndpoint) {
    // Streams spooled by a process killed mid-transfer.
    fs.rmSync(spoolDir(ep.store), { recursive: true, force: true });
  }

  /** The layers of `layerId`'s chain the receiver lacks, oldest first. */
  missing(layerId: string, have: readonly string[]): string[] {
    const has = new Set(have);
    const out: string[] = [];
    for (const id of this.ep.store.layerChain(layerId)) {
      if (has.has(id)) break;
      out.push(id);
    }
    return out.reverse();
  }

  async export(layerId: string, have: readonly string[], opts: { onProgress?: OnProgress } = {}): Promise<ExportedLayer> {
    const { store, codec, base } = this.ep;
    if (store.layer(layerId).base !== base.path) throw ERRORS.transferOtherBase();
    const present = have.filter((id) => store.hasLayer(id));
    const frames: FrameHeader[] = [];
    const payloads: Payload[] = [];
    try {
      for (const id of this.missing(layerId, have)) {
        const deltaFrom = await codec.deltaBase(store, id, present);
        const p = await codec.payload(store, id, deltaFrom);
        payloads.push(p);
        const rec = store.layer(id);
        frames.push({ layerId: id, parent: rec.parent, deltaFrom, bytes: p.bytes, sha256: p.sha256, created_at: rec.created_at });
        present.push(id);
      }
    } catch (e) {
      for (const p of payloads) await p.release();
      throw e;
    }
    const header: TransferHeader = { version: 1, kind: codec.kind, base: base.id, layer: layerId, frames };
    const head = encodeHeader(header);
    const total = totalBytes(header);
    async function* body(): AsyncGenerator<Buffer> {
      let done = 0;
      try {
        yield head;
        opts.onProgress?.({ done, total });
        for (const p of payloads)
          for await (const b of fs.createReadStream(p.path) as AsyncIterable<Buffer>) {
            done += b.length;
            yield b;
            opts.onProgress?.({ done, total });
          }
      } finally {
        for (const p of payloads) await p.release();
      }
    }
    return { header, body: Readable.from(body(), { objectMode: false }), bodyBytes: head.length + total };
  }
}
