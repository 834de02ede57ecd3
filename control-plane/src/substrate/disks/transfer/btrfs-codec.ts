/**
 * Container layers (read-only btrfs subvolumes holding an overlayfs diff/) move as btrfs send streams.
 *
 * Sender: `btrfs send`, with `-p` against a layer the receiver holds when one is related on btrfs (the layer
 * was snapshotted from it, or both are snapshots of the same writable blob: successive live captures of one
 * machine), so only what changed since travels; otherwise a full stream of the layer, which is its own diff
 * only (its parent layers are separate subvolumes). The stream is spooled to a file under the store's root,
 * hashed as it is written, since the header announces size and SHA-256 before the payload.
 *
 * Receiver: `btrfs receive` straight into the store's blobs/ directory, the subvolume landing on the layer's
 * blob path unregistered (the store's own rule: a blob the state file does not name is swept at the next
 * open). Not a separate staging directory: a received subvolume is read-only, and a read-only subvolume
 * cannot be renamed into another directory (EROFS: its root's `..` would change), while a writable copy
 * (snapshot, or clearing ro) loses the received UUID that the next incremental stream is matched against.
 * What confines the stream: its first command must create a subvolume named exactly the layer id
 * (send-stream.ts), and `-C` chroots receive into blobs/ so no path reaches outside it; `-E 1` stops at the
 * first failed command; `-e` ends at the stream's end marker. What `btrfs receive` does not check (its man
 * page, BUGS): later commands may name paths relative to the new subvolume that reach sibling blobs, and
 * clone commands may reflink from any subvolume of the filesystem by UUID. Streams therefore come only from
 * the deployment's own hosts over the authenticated internal channel (docs/security.md, "Moving layers").
 */
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { deleteSubvolume, isSubvolume, readOnlyFs, subvolumeIdentity, type SubvolumeIdentity } from '../btrfs.js';
import type { LayerStore } from '../layer-store.js';
import { tetheredArgv } from '../tethered.js';
import type { LayerCodec, Payload } from './codec.js';
import { readStreamStart, STREAM_START_MAX } from './send-stream.js';
import type { FrameHeader } from './wire.js';

/** Where a sender spools its streams (emptied when a source is made: what a killed process left). */
export function spoolDir(store: LayerStore): string {
  return path.join(store.root, 'transfer-out');
}

/** The last bytes of a command's stderr, for an error's cause (never shown to a tenant). */
const STDERR_KEEP = 4096;

/**
 * The candidate to send a delta against: one the layer was snapshotted from, else the newest snapshot of the
 * same source (pure; pinned by a test).
 */
export function pickDeltaBase(layer: SubvolumeIdentity, candidates: ReadonlyArray<{ id: string; ident: SubvolumeIdentity }>): string | null {
  if (!layer.parentUuid) return null;
  const source = candidates.find((c) => c.ident.uuid === layer.parentUuid);
  if (source) return source.id;
  const siblings = candidates.filter((c) => c.ident.parentUuid === layer.parentUuid).sort((a, b) => b.ident.generation - a.ident.generation);
  return siblings[0]?.id ?? null;
}

/** Until a writable can take more, or is gone (the command stopped reading). */
function drainedOrClosed(w: Writable): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      w.off('drain', done);
      w.off('close', done);
      resolve();
    };
    w.on('drain', done);
    w.on('close', done);
  });
}

/** Spawn `btrfs args`, feeding stdin from `input` (if any) and handing stdout to `onStdout`; resolves on exit 0. */
function runBtrfs(args: string[], io: { tethered: boolean; input?: AsyncIterable<Buffer>; onStdout?: (c: Buffer) => Promise<void> }): Promise<void> {
  const [file, ...argv] = io.tethered ? tetheredArgv(process.pid, 'btrfs', args) : ['btrfs', ...args];
  const child = spawn(file, argv, { stdio: [io.input ? 'pipe' : 'ignore', io.onStdout ? 'pipe' : 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-STDERR_KEEP)));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve(code));
  });
  const feeding = (async () => {
    const stdin = child.stdin;
    if (!io.input || !stdin) return;
    stdin.on('error', () => {}); // EPIPE when the command stops reading: its exit status says why
    try {
      for await (const c of io.input) {
        if (stdin.destroyed || !stdin.writable) return;
        if (!stdin.write(c)) await drainedOrClosed(stdin);
      }
      stdin.end();
    } catch (e) {
      // The input was refused: the command must not go on with half of it.
      child.kill('SIGKILL');
      throw e;
    }
  })();
  const draining = (async () => {
    if (!io.onStdout || !child.stdout) return;
    for await (const c of child.stdout as AsyncIterable<Buffer>) await io.onStdout(c);
  })();
  return (async () => {
    const [code, fed, drained] = await Promise.allSettled([exited, feeding, draining]);
    for (const r of [fed, drained, code]) if (r.status === 'rejected') throw r.reason;
    if (code.status === 'fulfilled' && code.value !== 0) throw Object.assign(new Error(`btrfs ${args[0]} exited ${code.value}`), { stderr });
  })();
}

/** The chunks of `chunks`, first checking that the stream creates the subvolume `frame` announces. */
async function* checkedStream(chunks: AsyncIterable<Buffer>, frame: FrameHeader): AsyncGenerator<Buffer> {
  let head = Buffer.alloc(0);
  let checked = false;
  for await (const c of chunks) {
    if (checked) {
      yield c;
      continue;
    }
    head = Buffer.concat([head, c]);
    const start = readStreamStart(head.subarray(0, STREAM_START_MAX));
    if (start.kind === 'more') continue;
    if (start.kind === 'bad') throw new Error(start.reason);
    if (start.name !== frame.layerId) throw new Error('the stream creates another subvolume than the layer announced');
    if (start.command !== (frame.deltaFrom === null ? 'subvol' : 'snapshot')) throw new Error('the stream is not the kind of stream announced');
    checked = true;
    yield head;
  }
  if (!checked) throw new Error('the stream ended before its first command');
}

export const btrfsCodec: LayerCodec = {
  kind: 'btrfs',

  async deltaBase(store, layerId, present) {
    const layer = await subvolumeIdentity(store.blobPath(layerId));
    const candidates = [];
    for (const id of present) if (store.hasLayer(id)) candidates.push({ id, ident: await subvolumeIdentity(store.blobPath(id)) });
    return pickDeltaBase(layer, candidates);
  },

  async payload(store, layerId, deltaFrom): Promise<Payload> {
    const dir = spoolDir(store);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const file = path.join(dir, `${layerId}-${crypto.randomBytes(6).toString('hex')}`);
    const out = fs.createWriteStream(file, { flags: 'wx', mode: 0o600 });
    const hash = crypto.createHash('sha256');
    let bytes = 0;
    const release = async () => fs.rmSync(file, { force: true });
    try {
      const parent = deltaFrom === null ? [] : ['-p', store.blobPath(deltaFrom)];
      await runBtrfs(['send', '-q', ...parent, store.blobPath(layerId)], {
        tethered: false,
        onStdout: async (c) => {
          hash.update(c);
          bytes += c.length;
          if (!out.write(c)) await new Promise<void>((r) => out.once('drain', r));
        },
      });
      await new Promise<void>((resolve, reject) => out.end((e?: Error | null) => (e ? reject(e) : resolve())));
    } catch (e) {
      out.destroy();
      await release();
      throw e;
    }
    return { path: file, bytes, sha256: hash.digest('hex'), release };
  },

  async place(store, frame, chunks) {
    const blobs = path.dirname(store.blobPath(frame.layerId));
    await runBtrfs(['receive', '-q', '-C', '-e', '-E', '1', blobs], { tethered: true, input: checkedStream(chunks, frame) });
    const blob = store.blobPath(frame.layerId);
    if (!isSubvolume(blob) || !readOnlyFs(blob)) throw new Error('the stream did not leave a read-only subvolume at the layer\'s path');
  },

  async discard(store, layerId) {
    if (store.hasLayer(layerId)) return;
    const blob = store.blobPath(layerId);
    if (isSubvolume(blob)) await deleteSubvolume(blob);
    else fs.rmSync(blob, { recursive: true, force: true });
  },
};
