/**
 * The receiving side of a layer transfer: `(header, body) => result`. The body is untrusted input, bounded by
 * its header: each payload is read to exactly its announced size (no further), hashed, and applied by the
 * codec as an unregistered blob; only when every frame arrived whole, matched its SHA-256 and was applied,
 * and nothing follows the last one, are the layers registered, in one state write, pinned by the caller's
 * holder. Anything else removes what the transfer placed and throws a named error: nothing is registered.
 * Transfers into one store run one at a time, so two of the same layer never race for its blob path.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { ERRORS } from '../../../errors.js';
import { ByteReader } from './byte-reader.js';
import type { OnProgress, TransferEndpoint } from './endpoint.js';
import { incomingDir } from './qcow2-codec.js';
import { readHeader, totalBytes, type FrameHeader, type TransferHeader } from './wire.js';

export interface ReceivedLayer {
  /** The layer asked for, now held here and pinned by the holder. */
  layerId: string;
  /** Layers registered by this transfer, oldest first (empty: the host had them all). */
  registered: string[];
  /** Payload bytes read. */
  bytes: number;
}

/** The header at the start of a transfer body, and a reader left at its first payload byte. */
export async function readTransfer(body: AsyncIterable<Buffer | Uint8Array | string>): Promise<{ header: TransferHeader; payload: ByteReader }> {
  const payload = new ByteReader(body);
  return { header: await readHeader(payload), payload };
}

export class LayerSink {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly ep: TransferEndpoint) {
    // Payloads a process killed mid-transfer left half written.
    fs.rmSync(incomingDir(ep.store), { recursive: true, force: true });
  }

  /** Which of `candidates` (default: every layer) this host holds on the same guest image: the sender's `have`. */
  have(candidates?: readonly string[]): string[] {
    const { store, base } = this.ep;
    const ids = candidates ?? store.layers().map((l) => l.id);
    return ids.filter((id) => store.hasLayer(id) && store.layer(id).base === base.path);
  }

  receive(header: TransferHeader, payload: ByteReader, opts: { holder: string; onProgress?: OnProgress }): Promise<ReceivedLayer> {
    const p = this.queue.then(() => this.receiveNow(header, payload, opts));
    this.queue = p.catch(() => {});
    return p;
  }

  /** The header's promises that this host can check before any payload: its image, the chain's foot, room. */
  private admit(header: TransferHeader): void {
    const { store, codec, base } = this.ep;
    if (header.kind !== codec.kind) throw ERRORS.transferHeaderInvalid(`payloads of kind ${header.kind} on a ${codec.kind} store`);
    if (header.base !== base.id) throw ERRORS.transferOtherBase();
    const first = header.frames[0];
    if (!first && !store.hasLayer(header.layer)) throw ERRORS.transferHeaderInvalid('no frames for a layer this host lacks');
    if (first && first.parent !== null && !this.have([first.parent]).length) throw ERRORS.transferHeaderInvalid('the chain stands on a layer this host lacks');
    header.frames.forEach((f, i) => {
      if (f.deltaFrom !== null && !store.hasLayer(f.deltaFrom) && !header.frames.slice(0, i).some((e) => e.layerId === f.deltaFrom))
        throw ERRORS.transferHeaderInvalid(`frame ${i} is a delta against a layer this host lacks`);
    });
    const st = fs.statfsSync(store.root);
    const free = st.bavail * st.bsize;
    if (totalBytes(header) > free) throw ERRORS.transferNoRoom(totalBytes(header), free);
  }

  private async receiveNow(header: TransferHeader, payload: ByteReader, opts: { holder: string; onProgress?: OnProgress }): Promise<ReceivedLayer> {
    const { store, codec, base } = this.ep;
    const total = totalBytes(header);
    let done = 0;
    const placed: FrameHeader[] = [];
    try {
      this.admit(header);
      for (const frame of header.frames) {
        const hash = crypto.createHash('sha256');
        const count = (c: Buffer) => {
          hash.update(c);
          done += c.length;
          opts.onProgress?.({ done, total });
        };
        // A layer that arrived since the sender asked (another transfer): its payload is read and dropped.
        const wanted = !store.hasLayer(frame.layerId);
        const slice = payload.slice(frame.bytes, count);
        let refused: unknown = null;
        if (wanted) {
          placed.push(frame);
          const lower = frame.parent === null ? base.path : store.blobPath(frame.parent);
          await codec.place(store, frame, slice.chunks, lower).catch((e: unknown) => (refused = e));
        }
        // What the codec left unread (it stopped at a refusal): read to the announced end, to know its digest.
        const rest = payload.slice(frame.bytes - slice.got(), count);
        for await (const _ of rest.chunks);
        const got = slice.got() + rest.got();
        if (got < frame.bytes) throw ERRORS.transferTruncated(frame.layerId, got, frame.bytes);
        if (hash.digest('hex') !== frame.sha256) throw ERRORS.transferChecksumMismatch(frame.layerId);
        if (refused !== null) throw ERRORS.transferStreamRefused(frame.layerId, refused);
      }
      if (!(await payload.atEnd())) throw ERRORS.transferTrailingBytes();
      if (!header.frames.length) {
        await store.pin(header.layer, opts.holder);
        return { layerId: header.layer, registered: [], bytes: 0 };
      }
      const records = header.frames.map((f) => ({ id: f.layerId, parent: f.parent, created_at: f.created_at }));
      return { layerId: header.layer, registered: await store.adoptLayers(records, base.path, opts.holder), bytes: done };
    } catch (e) {
      await payload.close().catch(() => {});
      for (const f of placed.reverse()) await codec.discard(store, f.layerId).catch(() => {});
      throw e;
    }
  }
}
