import { z } from 'zod';
import { GuestPath, GuestUser, queryInt } from './common.js';

/** An inline read returns at most this many bytes; larger files are read as ranges. */
export const MAX_READ_RANGE = 4 * 1024 * 1024;
/** Largest decoded payload of one write; larger uploads are a write plus appends. */
export const MAX_WRITE_BYTES = 32 * 1024 * 1024;
/** Largest JSON body of one file write: the base64 of MAX_WRITE_BYTES plus the envelope. */
export const MAX_WRITE_BODY_BYTES = Math.ceil((MAX_WRITE_BYTES * 4) / 3) + 1024 * 1024;
/** Largest JSON body of the other machine routes (exec stdin, clipboard text, typed text). */
export const MAX_MACHINE_BODY_BYTES = 10 * 1024 * 1024;
/** SDK download loops stop here unless the caller raises it. */
export const DEFAULT_DOWNLOAD_MAX = 64 * 1024 * 1024;

export const FileEncoding = z.enum(['utf8', 'base64']);
export type FileEncoding = z.infer<typeof FileEncoding>;

/**
 * Files routes act as the unprivileged `agent` user unless `user` is `root`; as root they need the
 * machines:control permission (the control plane checks it), as the agent user only machines:read.
 * The guest kernel checks each access for that user.
 */
export const ListQuery = z.strictObject({ path: GuestPath, user: GuestUser.default('agent') });
export type ListQuery = z.infer<typeof ListQuery>;

export const FileType = z.enum(['file', 'directory', 'symlink', 'other']);
export const DirEntry = z.object({
  name: z.string(),
  path: z.string(),
  type: FileType,
  /** Bytes (for a symlink: the link itself). */
  size: z.number().int(),
  /** Permission bits as an octal string, e.g. "0644". */
  mode: z.string(),
  modified_at: z.string(),
});
export type DirEntry = z.infer<typeof DirEntry>;

export const ListResult = z.object({ path: z.string(), entries: z.array(DirEntry) });
export type ListResult = z.infer<typeof ListResult>;

export const ReadQuery = z.strictObject({
  path: GuestPath,
  offset: queryInt(0, Number.MAX_SAFE_INTEGER).default(0),
  length: queryInt(1, MAX_READ_RANGE).default(MAX_READ_RANGE),
  encoding: FileEncoding.default('utf8'),
  user: GuestUser.default('agent'),
});
export type ReadQuery = z.infer<typeof ReadQuery>;

export const ReadResult = z.object({
  path: z.string(),
  encoding: FileEncoding,
  content: z.string(),
  offset: z.number().int(),
  /** Bytes returned in this range. */
  length: z.number().int(),
  /** File size when the file has one (0 for most /proc files). */
  size: z.number().int(),
  /** True when nothing follows this range. */
  eof: z.boolean(),
});
export type ReadResult = z.infer<typeof ReadResult>;

export const WriteQuery = z.strictObject({ path: GuestPath });
export type WriteQuery = z.infer<typeof WriteQuery>;

export const FileMode = z.string().regex(/^0?[0-7]{3,4}$/, 'mode is an octal string such as "0644" or "755"');

export const WriteBody = z.strictObject({
  content: z.string(),
  encoding: FileEncoding.default('utf8'),
  append: z.boolean().default(false),
  /** Create missing parent directories. */
  createDirs: z.boolean().default(true),
  mode: FileMode.optional(),
  /** Who writes: the `agent` user (the default) or `root`; what the write creates belongs to that user. */
  user: GuestUser.default('agent'),
});
export type WriteBody = z.infer<typeof WriteBody>;

export const WriteResult = z.object({
  path: z.string(),
  /** File size after the write. */
  size: z.number().int(),
  /** Bytes written by this call. */
  written: z.number().int(),
});
export type WriteResult = z.infer<typeof WriteResult>;
