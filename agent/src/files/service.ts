/**
 * The files API: list, read (whole or ranged), write (atomic replace or append). Runs as root in the
 * agent for `user: root`, and as the agent user in the files worker (worker.ts) for everything else;
 * every path goes through the denylist walker, and every object used is the fd it returned.
 */
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { AppError, invalid } from '../../../shared/errors.js';
import type { DirEntry, ListResult, ReadQuery, ReadResult, WriteBody, WriteResult } from '../../../shared/schemas/files.js';
import { MAX_WRITE_BYTES } from '../../../shared/schemas/files.js';
import { guestUser, type UserInfo } from '../users.js';
import { createDenylist, fdPath, safeClose, type DenySpec, type Denylist } from '../denylist/index.js';
import { ERRORS } from '../errors.js';

const pread = promisify(fs.read);
const pwrite = promisify(fs.write);
const pfsync = promisify(fs.fsync);
const { O_RDONLY, O_WRONLY, O_APPEND, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY } = fs.constants;

export interface FileServiceOptions {
  deny: DenySpec;
  /** Name of the unprivileged guest user (default `agent`). */
  agentUserName?: string;
  /** Injected for tests; defaults to the current process. */
  agentPid?: number;
  /** Resolve a guest user (default: users.ts guestUser). */
  resolveUser?: (u: 'agent' | 'root') => UserInfo;
  /** Identities of denied objects captured by a process that could stat them (the files worker gets the agent's). */
  deniedIdentities?: { inodes: string[]; rdevs: number[] };
}

/** A byte range as read from a file, before it is encoded for the client. */
export interface RawRange {
  data: Buffer;
  /** The file's stat size. */
  size: number;
  eof: boolean;
}

export type RangeQuery = Pick<ReadQuery, 'path' | 'offset' | 'length'>;
/** A write's options once its content is decoded into bytes. */
export type WriteOptions = Omit<WriteBody, 'content' | 'encoding'>;

export interface FileService {
  readonly denylist: Denylist;
  list(p: string): Promise<ListResult>;
  read(q: ReadQuery): Promise<ReadResult>;
  /** The bytes of a range (read = readRange + encodeRange). */
  readRange(q: RangeQuery): Promise<RawRange>;
  /** A write of bytes already decoded and size-checked (write = decodeWrite + writeBytes). */
  writeBytes(p: string, data: Buffer, opts: WriteOptions): Promise<WriteResult>;
  write(p: string, body: WriteBody): Promise<WriteResult>;
}

export function modeString(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

function typeOf(st: fs.Stats): DirEntry['type'] {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'directory';
  if (st.isSymbolicLink()) return 'symlink';
  return 'other';
}


export function decodeContent(content: string, encoding: 'utf8' | 'base64'): Buffer {
  if (encoding === 'utf8') return Buffer.from(content, 'utf8');
  const clean = content.replace(/[\r\n]/g, '');
  // Checked without one whole-string pattern: a pattern with repeated groups overflowed V8's regexp
  // stack on tens of MB (a 500 for every large write). Groups of 4; the last may be 2 or 3 characters,
  // padded with `=` to 4 or not.
  const pad = clean.endsWith('==') ? 2 : clean.endsWith('=') ? 1 : 0;
  const body = clean.slice(0, clean.length - pad);
  const ok = !/[^A-Za-z0-9+/]/.test(body) && body.length % 4 !== 1 && (pad === 0 || clean.length % 4 === 0);
  if (!ok) throw invalid('content is not valid base64.', [{ field: 'content', message: 'not valid base64' }]);
  return Buffer.from(clean, 'base64');
}

const utf8Strict = new TextDecoder('utf-8', { fatal: true });

/** A range's bytes as the client asked for them (base64, or UTF-8 text that must be valid). */
export function encodeRange(q: ReadQuery, r: RawRange): ReadResult {
  let content: string;
  if (q.encoding === 'base64') content = r.data.toString('base64');
  else {
    try {
      content = utf8Strict.decode(r.data);
    } catch {
      throw invalid(
        `${q.path} is not valid UTF-8 text${q.offset || !r.eof ? ' in this range (a range can split a character)' : ''}; ask for encoding=base64.`,
        [{ field: 'encoding', message: 'content is not UTF-8; use base64' }],
      );
    }
  }
  return { path: q.path, encoding: q.encoding, content, offset: q.offset, length: r.data.length, size: r.size, eof: r.eof };
}

/** A write body's content as bytes, refused when over MAX_WRITE_BYTES. */
export function decodeWrite(body: WriteBody): Buffer {
  const data = decodeContent(body.content, body.encoding);
  if (data.length > MAX_WRITE_BYTES) {
    throw invalid(`content exceeds ${MAX_WRITE_BYTES} bytes; write in parts with append.`, [{ field: 'content', message: 'too large' }]);
  }
  return data;
}

export function createFileService(opts: FileServiceOptions): FileService {
  const denylist = createDenylist(opts.deny, { agentPid: opts.agentPid, identities: opts.deniedIdentities });
  // Only root can give a file to someone else. The files worker runs as the agent user: what it creates
  // and replaces belongs to that user, as with any program the user runs.
  const privileged = process.getuid?.() === 0;
  const userOf = opts.resolveUser ?? ((u: 'agent' | 'root') => guestUser(u, opts.agentUserName ?? 'agent'));

  async function list(p: string): Promise<ListResult> {
    const w = denylist.walk(p);
    try {
      if (!w.stat!.isDirectory()) throw invalid(`${p} is not a directory.`, [{ field: 'path', message: 'not a directory' }]);
      // readdir through the held fd's magic link: the directory we checked, not whatever the path names now.
      let names: string[];
      try {
        names = fs.readdirSync(fdPath(w.fd!)).sort();
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'EACCES' || code === 'EPERM') throw ERRORS.listingNotPermitted(p);
        throw e;
      }
      const entries: DirEntry[] = [];
      for (const name of names) {
        let st: fs.Stats;
        try {
          st = fs.lstatSync(fdPath(w.fd!, name));
        } catch {
          continue; // gone since readdir
        }
        entries.push({
          name,
          path: path.posix.join(p, name),
          type: typeOf(st),
          size: Number(st.size),
          mode: modeString(st.mode),
          modified_at: st.mtime.toISOString(),
        });
      }
      return { path: p, entries };
    } finally {
      w.close();
    }
  }

  async function readRange(q: RangeQuery): Promise<RawRange> {
    const w = denylist.walk(q.path);
    let fd = -1;
    try {
      const st = w.stat!;
      if (st.isDirectory()) throw invalid(`${q.path} is a directory; list it instead.`, [{ field: 'path', message: 'is a directory' }]);
      // Devices, FIFOs and sockets can block or have side effects on open; only regular files are read.
      if (!st.isFile()) throw invalid(`${q.path} is not a regular file.`, [{ field: 'path', message: 'not a regular file' }]);
      try {
        fd = fs.openSync(fdPath(w.fd!), O_RDONLY);
      } catch (e) {
        // The kernel's answer for the user the read runs as (the files worker: the agent user).
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'EACCES' || code === 'EPERM') throw ERRORS.readingNotPermitted(q.path);
        throw e;
      }
      // One byte past the range tells whether more follows, also for /proc files that report size 0.
      const want = q.length + 1;
      const buf = Buffer.allocUnsafe(want);
      let got = 0;
      while (got < want) {
        const { bytesRead } = await pread(fd, buf, got, want - got, q.offset + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      const eof = got <= q.length;
      return { data: buf.subarray(0, Math.min(got, q.length)), size: Number(st.size), eof };
    } finally {
      if (fd >= 0) safeClose(fd);
      w.close();
    }
  }

  async function writeBytes(p: string, data: Buffer, body: WriteOptions): Promise<WriteResult> {
    const owner = userOf(body.user);
    const mode = body.mode !== undefined ? parseInt(body.mode, 8) : undefined;
    const w = denylist.walk(p, { allowMissingLeaf: true, createDirs: body.createDirs ? { uid: owner.uid, gid: owner.gid } : null });
    try {
      if (w.name === '') throw invalid('Cannot write to /.', [{ field: 'path', message: 'is a directory' }]);
      if (w.stat && w.stat.isDirectory()) throw invalid(`${p} is a directory.`, [{ field: 'path', message: 'is a directory' }]);
      if (w.stat && !w.stat.isFile()) throw invalid(`${p} is not a regular file.`, [{ field: 'path', message: 'not a regular file' }]);
      return body.append ? await appendTo(p, w, data, owner, mode) : await replace(p, w, data, owner, mode);
    } catch (e) {
      throw mapWriteError(e, p);
    } finally {
      w.close();
    }
  }

  async function appendTo(p: string, w: ReturnType<Denylist['walk']>, data: Buffer, owner: UserInfo, mode?: number): Promise<WriteResult> {
    let fd: number;
    if (w.fd !== null) {
      // Reopen the very inode we checked (magic link), never the path.
      fd = fs.openSync(fdPath(w.fd), O_WRONLY | O_APPEND);
    } else {
      fd = fs.openSync(fdPath(w.parentFd, w.name), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
      if (privileged) fs.fchownSync(fd, owner.uid, owner.gid);
      fs.fchmodSync(fd, mode ?? 0o644);
    }
    try {
      if (w.fd !== null && mode !== undefined) fs.fchmodSync(fd, mode);
      await writeAll(fd, data);
      await pfsync(fd);
      const size = Number(fs.fstatSync(fd).size);
      return { path: p, size, written: data.length };
    } finally {
      safeClose(fd);
    }
  }

  async function replace(p: string, w: ReturnType<Denylist['walk']>, data: Buffer, owner: UserInfo, mode?: number): Promise<WriteResult> {
    const tmp = `.${w.name.slice(0, 60)}.tmp-${randomBytes(6).toString('hex')}`;
    // O_EXCL|O_NOFOLLOW: the temp name is new; nothing planted there can redirect the write.
    const fd = fs.openSync(fdPath(w.parentFd, tmp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    let renamed = false;
    try {
      // A replaced file keeps its owner and mode unless the caller gives a mode; a new one belongs to `user`.
      const uid = w.stat ? w.stat.uid : owner.uid;
      const gid = w.stat ? w.stat.gid : owner.gid;
      if (privileged) fs.fchownSync(fd, uid, gid);
      fs.fchmodSync(fd, mode ?? (w.stat ? w.stat.mode & 0o7777 : 0o644));
      await writeAll(fd, data);
      await pfsync(fd);
      // Both names are looked up in the directory we hold; rename replaces a directory entry and never
      // writes through whatever that entry pointed at.
      fs.renameSync(fdPath(w.parentFd, tmp), fdPath(w.parentFd, w.name));
      renamed = true;
      // The rename is durable once the directory is synced.
      const dfd = fs.openSync(fdPath(w.parentFd), O_RDONLY | O_DIRECTORY);
      try {
        await pfsync(dfd);
      } finally {
        safeClose(dfd);
      }
      return { path: p, size: data.length, written: data.length };
    } finally {
      safeClose(fd);
      if (!renamed) {
        try {
          fs.unlinkSync(fdPath(w.parentFd, tmp));
        } catch {
          /* best effort */
        }
      }
    }
  }

  return {
    denylist,
    list,
    readRange,
    read: async (q) => encodeRange(q, await readRange(q)),
    writeBytes,
    write: async (p, body) => writeBytes(p, decodeWrite(body), body),
  };
}

async function writeAll(fd: number, data: Buffer): Promise<void> {
  let off = 0;
  while (off < data.length) {
    const { bytesWritten } = await pwrite(fd, data, off, data.length - off);
    off += bytesWritten;
  }
}

function mapWriteError(e: unknown, p: string): unknown {
  if (e instanceof AppError) return e;
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code === 'ENOSPC' || code === 'EDQUOT') return ERRORS.noSpaceToWrite(p);
  if (code === 'EROFS') return ERRORS.readOnlyFileSystem(p);
  if (code === 'EACCES' || code === 'EPERM') return ERRORS.writingNotPermitted(p);
  if (code === 'EISDIR') return invalid(`${p} is a directory.`, [{ field: 'path', message: 'is a directory' }]);
  if (code === 'ENOENT' || code === 'EXDEV' || code === 'EINVAL') {
    // e.g. /proc and /sys do not support creating a temp file beside the target.
    return invalid(`${p} cannot be written atomically here; try append.`, [{ field: 'path', message: 'unsupported location' }]);
  }
  return e;
}
