/**
 * VM layers (qcow2 files holding only their own clusters, chained by backing file) move as the file itself:
 * no delta to choose, the file is already one. The receiver writes it under <root>/incoming (same filesystem,
 * emptied when a sink is made), checks it is a plain qcow2 (no external data file: it would name a host path),
 * points its backing file at this host's parent blob or base image (`rebase -u`: header only), seals it and
 * renames it onto the layer's blob path, still unregistered.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { z } from 'zod';
import type { LayerStore } from '../layer-store.js';
import { runTethered } from '../tethered.js';
import { digestFile, type LayerCodec } from './codec.js';

/** Where a receiver writes payloads before they are blobs (emptied when a sink is made). */
export function incomingDir(store: LayerStore): string {
  return path.join(store.root, 'incoming');
}

const infoSchema = z.object({
  format: z.string(),
  'format-specific': z.object({ data: z.object({ 'data-file': z.string().optional() }).loose().optional() }).loose().optional(),
}).loose();

export const qcow2Codec: LayerCodec = {
  kind: 'qcow2',

  async deltaBase() {
    return null;
  },

  async payload(store, layerId) {
    const file = store.blobPath(layerId);
    return { path: file, ...(await digestFile(file)), release: async () => {} };
  },

  async place(store, frame, chunks, lower) {
    const dir = incomingDir(store);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const file = path.join(dir, path.basename(store.blobPath(frame.layerId)));
    await pipeline(Readable.from(chunks), fs.createWriteStream(file, { flags: 'wx', mode: 0o600 }));
    const { stdout } = await runTethered('qemu-img', ['info', '--output=json', '-f', 'qcow2', file]);
    const info = infoSchema.parse(JSON.parse(stdout));
    if (info.format !== 'qcow2' || info['format-specific']?.data?.['data-file'] !== undefined) throw new Error('not a plain qcow2 layer');
    await runTethered('qemu-img', ['rebase', '-q', '-u', '-f', 'qcow2', '-b', lower, '-F', 'qcow2', file]);
    fs.chmodSync(file, 0o400);
    fs.renameSync(file, store.blobPath(frame.layerId));
  },

  async discard(store, layerId) {
    fs.rmSync(path.join(incomingDir(store), path.basename(store.blobPath(layerId))), { force: true });
    if (!store.hasLayer(layerId)) fs.rmSync(store.blobPath(layerId), { force: true });
  },
};
