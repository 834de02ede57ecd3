/**
 * The first command of a btrfs send stream, read before `btrfs receive` sees any of it: the stream must create
 * exactly the announced layer (its subvolume name is the layer id, so it lands on the blob path the store
 * expects and can name no other), as a full stream (`subvol`) or as a delta (`snapshot`) when one was
 * announced. Format (btrfs-progs send.h): "btrfs-stream\0", u32 version, then commands of u32 length, u16
 * command, u32 crc32c and TLV attributes (u16 type, u16 length, value), all little-endian.
 */
const STREAM_MAGIC = Buffer.from('btrfs-stream\0', 'latin1');
const STREAM_HEAD = STREAM_MAGIC.length + 4;
const CMD_HEAD = 10;
const CMD_SUBVOL = 1;
const CMD_SNAPSHOT = 2;
const ATTR_PATH = 15;
/** A first command holds a path, a UUID and a transid (and a clone UUID): far less than this. */
const MAX_FIRST_COMMAND = 4096;

export type StreamStart =
  | { kind: 'more' }
  | { kind: 'ok'; command: 'subvol' | 'snapshot'; name: string }
  | { kind: 'bad'; reason: string };

/** What the start of a send stream creates, from its first bytes (`more`: not enough of them yet). Pure. */
export function readStreamStart(head: Buffer): StreamStart {
  if (head.length < STREAM_HEAD + CMD_HEAD) return head.length >= STREAM_MAGIC.length && !head.subarray(0, STREAM_MAGIC.length).equals(STREAM_MAGIC) ? { kind: 'bad', reason: 'not a btrfs send stream' } : { kind: 'more' };
  if (!head.subarray(0, STREAM_MAGIC.length).equals(STREAM_MAGIC)) return { kind: 'bad', reason: 'not a btrfs send stream' };
  const len = head.readUInt32LE(STREAM_HEAD);
  const cmd = head.readUInt16LE(STREAM_HEAD + 4);
  if (cmd !== CMD_SUBVOL && cmd !== CMD_SNAPSHOT) return { kind: 'bad', reason: `the stream starts with command ${cmd}` };
  if (len > MAX_FIRST_COMMAND) return { kind: 'bad', reason: 'the first command is too long' };
  const start = STREAM_HEAD + CMD_HEAD;
  if (head.length < start + len) return { kind: 'more' };
  let name: string | null = null;
  for (let at = start; at + 4 <= start + len; ) {
    const type = head.readUInt16LE(at);
    const size = head.readUInt16LE(at + 2);
    if (at + 4 + size > start + len) return { kind: 'bad', reason: 'an attribute overruns its command' };
    if (type === ATTR_PATH) name = head.subarray(at + 4, at + 4 + size).toString('latin1');
    at += 4 + size;
  }
  if (name === null) return { kind: 'bad', reason: 'the first command names no subvolume' };
  return { kind: 'ok', command: cmd === CMD_SUBVOL ? 'subvol' : 'snapshot', name };
}

/** The bytes readStreamStart needs at most (callers stop buffering there). */
export const STREAM_START_MAX = STREAM_HEAD + CMD_HEAD + MAX_FIRST_COMMAND;
