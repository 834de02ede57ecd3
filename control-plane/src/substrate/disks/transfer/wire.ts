/**
 * The framing of a layer transfer over one HTTP body (the internal channel between host processes carries it):
 *
 *   "LXF1"  u32 BE header length  header (JSON, at most MAX_HEADER_BYTES)  payload of frame 1 … payload of frame n
 *
 * The header announces every frame (layer id, parent, the layer its stream is a delta against, size, SHA-256),
 * oldest first, so the receiver knows how much to read before it reads it and can refuse early (wrong image,
 * no room). Each payload is exactly its announced size; nothing may follow the last one.
 */
import { z } from 'zod';
import { ERRORS } from '../../../errors.js';
import type { ByteReader } from './byte-reader.js';

export const MAGIC = Buffer.from('LXF1');
export const MAX_HEADER_BYTES = 64 * 1024;
/** A chain never holds more layers than the store's depth limit; the header is bounded by it. */
export const MAX_FRAMES = 64;
/** Layer (blob) ids as the layer store makes them; they become file names on the receiver. */
const LAYER_ID = /^blb_[0-9a-f]{1,64}$/;

const layerId = z.string().regex(LAYER_ID);
/** A layer id as the store names them (never anything else in a path or a body between hosts). */
export const LayerId = layerId;
const frameSchema = z.strictObject({
  layerId,
  parent: layerId.nullable(),
  /** The layer the payload is a delta against (btrfs send -p), which the receiver holds or gets earlier here. */
  deltaFrom: layerId.nullable(),
  bytes: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  created_at: z.string().max(64),
});
const headerSchema = z.strictObject({
  version: z.literal(1),
  /** The payload format: a btrfs send stream (container layers) or a qcow2 file (vm layers). */
  kind: z.enum(['btrfs', 'qcow2']),
  /** The guest image every layer here stands on (its identity, never a host path). */
  base: z.string().min(1).max(128),
  /** The layer asked for: the last frame, or one the receiver already holds (no frames). */
  layer: layerId,
  frames: z.array(frameSchema).max(MAX_FRAMES),
});

export type FrameHeader = z.infer<typeof frameSchema>;
export type TransferHeader = z.infer<typeof headerSchema>;
export type PayloadKind = TransferHeader['kind'];

export function totalBytes(header: TransferHeader): number {
  return header.frames.reduce((n, f) => n + f.bytes, 0);
}

export function encodeHeader(header: TransferHeader): Buffer {
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(4);
  len.writeUInt32BE(json.length);
  return Buffer.concat([MAGIC, len, json]);
}

/**
 * Read and check the header at the start of a body; the reader is left at the first payload byte. The body is
 * untrusted: its magic, length, JSON and shape are all checked, and the chain must hang together (each frame's
 * parent is the frame before it; the last frame is the layer asked for).
 */
export async function readHeader(reader: ByteReader): Promise<TransferHeader> {
  const magic = await reader.readExactly(MAGIC.length);
  if (!magic || !magic.equals(MAGIC)) throw ERRORS.transferHeaderInvalid('not a layer transfer');
  const len = await reader.readExactly(4);
  if (!len) throw ERRORS.transferHeaderInvalid('no header length');
  const n = len.readUInt32BE(0);
  if (n > MAX_HEADER_BYTES) throw ERRORS.transferHeaderInvalid(`header of ${n} bytes exceeds ${MAX_HEADER_BYTES}`);
  const json = await reader.readExactly(n);
  if (!json) throw ERRORS.transferHeaderInvalid('the header is cut short');
  let raw: unknown;
  try {
    raw = JSON.parse(json.toString('utf8'));
  } catch {
    throw ERRORS.transferHeaderInvalid('the header is not JSON');
  }
  const parsed = headerSchema.safeParse(raw);
  if (!parsed.success) throw ERRORS.transferHeaderInvalid(`bad field ${parsed.error.issues[0]?.path.join('.') ?? ''}`);
  const header = parsed.data;
  header.frames.forEach((f, i) => {
    const prev = header.frames[i - 1];
    if (prev && f.parent !== prev.layerId) throw ERRORS.transferHeaderInvalid(`frame ${i} does not stand on frame ${i - 1}`);
  });
  const last = header.frames[header.frames.length - 1];
  if (last && last.layerId !== header.layer) throw ERRORS.transferHeaderInvalid('the last frame is not the layer asked for');
  return header;
}
