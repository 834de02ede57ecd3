/**
 * This host's identity: `host_` + random (shared/ids.ts), created once in `DATA_DIR/host-id` and read at every
 * start. Every process started on one DATA_DIR is the same host (issue 24 item 5).
 *
 * Created atomically and exactly once even when several processes start on an empty DATA_DIR together: each writes
 * its candidate to its own temporary file (0600, fsynced) and `link`s it to `host-id`, which fails if the name
 * exists, so the first link wins and every process reads the winner's id. A file that holds anything but one id is
 * refused (never replaced: a new identity would orphan the host's machines).
 */
import fs from 'node:fs';
import path from 'node:path';
import { isIdOf, newId } from '../../../shared/ids.js';

export const HOST_ID_FILE = 'host-id';

export class HostIdUnreadable extends Error {
  override name = 'HostIdUnreadable';
}

export const HOST_ID_ERRORS = {
  malformed: (file: string) => new HostIdUnreadable(`${file} does not hold a host id (host_ and 20-32 of [0-9a-z]): restore it from a backup, never delete it while the host has machines`),
};

function readId(file: string): string | null {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  const id = text.trim();
  if (!isIdOf('host', id) || text !== `${id}\n`) throw HOST_ID_ERRORS.malformed(file);
  return id;
}

/** The host id of `dataDir`, created (see the header) when it has none. `dataDir` must exist. */
export function readOrCreateHostId(dataDir: string): string {
  const file = path.join(dataDir, HOST_ID_FILE);
  const existing = readId(file);
  if (existing) return existing;
  const tmp = path.join(dataDir, `.${HOST_ID_FILE}.${process.pid}.${newId('host').slice(5, 13)}`);
  const fd = fs.openSync(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
  try {
    fs.writeSync(fd, `${newId('host')}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.linkSync(tmp, file);
    const dir = fs.openSync(dataDir, 'r');
    try {
      fs.fsyncSync(dir);
    } finally {
      fs.closeSync(dir);
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  const id = readId(file);
  if (!id) throw HOST_ID_ERRORS.malformed(file);
  return id;
}
