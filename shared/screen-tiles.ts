/**
 * Reading the screen channel's `tiles` encoding on a client (docs/gateway.md "Screen encodings"): one
 * binary WebSocket message → its header and the image bytes of each part. Dependency-free so that the
 * dashboard bundle and the SDKs can use it. The gateway re-frames only headers it has validated
 * (every rectangle within the frame, sizes adding up); this still refuses a message that does not parse.
 */

export interface TileRect {
  x: number;
  y: number;
  w: number;
  h: number;
  bytes: number;
}

export type ScreenTilesHeader =
  | { type: 'frame'; seq: number; format: 'jpeg' | 'webp'; width: number; height: number; captured_at: number; bytes: number }
  | {
    type: 'tiles';
    seq: number;
    format: 'jpeg' | 'webp';
    width: number;
    height: number;
    captured_at: number;
    copy: { sx: number; sy: number; x: number; y: number; w: number; h: number } | null;
    rects: TileRect[];
    bytes: number;
  };

export interface ScreenTilesMessage<B extends ArrayBufferLike = ArrayBuffer> {
  header: ScreenTilesHeader;
  /** `frame`: one whole image at (0, 0). `tiles`: one image per rect, in order (views into the message). */
  images: Array<{ x: number; y: number; data: Uint8Array<B> }>;
}

export class ScreenTilesFormatError extends Error {}

export function decodeScreenTilesMessage<B extends ArrayBufferLike>(buf: Uint8Array<B>): ScreenTilesMessage<B> {
  if (buf.length < 4) throw new ScreenTilesFormatError('screen message too short');
  const hlen = new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getUint32(0);
  if (4 + hlen > buf.length) throw new ScreenTilesFormatError('screen message header truncated');
  const header = JSON.parse(new TextDecoder().decode(buf.subarray(4, 4 + hlen))) as ScreenTilesHeader;
  const payload = buf.subarray(4 + hlen);
  if (payload.length !== header.bytes) throw new ScreenTilesFormatError('screen message payload size mismatch');
  if (header.type === 'frame') return { header, images: [{ x: 0, y: 0, data: payload }] };
  if (header.type !== 'tiles') throw new ScreenTilesFormatError('unknown screen message');
  let at = 0;
  const images = header.rects.map((r) => {
    const data = payload.subarray(at, at + r.bytes);
    at += r.bytes;
    return { x: r.x, y: r.y, data };
  });
  return { header, images };
}
