/**
 * Secrets delivery. The whole set lives in `<dir>/secrets.env` (0600, owned by the agent user so its
 * login shell can source it) on a memory-backed file system, and a fixed profile script loads it in
 * login shells. Nothing here ever returns a value: responses carry names and the delivery time.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { AppError } from '../../../shared/errors.js';
import type { SecretsDelivered } from '../../../shared/schemas/secrets.js';
import { runClean } from '../spawn/clean-spawn.js';
import { lookupUser, type UserInfo } from '../users.js';
import { ERRORS } from '../errors.js';

export const SECRETS_FILE_NAME = 'secrets.env';
export const DEFAULT_SECRETS_DIR = '/run/computer';
export const DEFAULT_PROFILE_SCRIPT = '/etc/profile.d/10-computer-secrets.sh';

/** statfs magic numbers of the memory-backed file systems. */
const TMPFS_MAGIC = 0x01021994;
const RAMFS_MAGIC = 0x858458f6;

export interface SecretStoreOptions {
  /** Directory of secrets.env; must be (or become) tmpfs/ramfs. */
  dir: string;
  /** The profile.d script that loads the file in login shells. */
  profileScript: string;
  /** Owner of secrets.env (the guest's unprivileged user). */
  userName: string;
  /** Injected for tests: mounts a tmpfs at dir (default: mount(8)). */
  mountTmpfs?: (dir: string) => Promise<void>;
}

export interface SecretStore {
  replace(secrets: Record<string, string>): Promise<SecretsDelivered>;
  remove(name: string): Promise<SecretsDelivered>;
  /** Names currently delivered. */
  names(): Promise<string[]>;
  /** The secrets file's path (so the wiring can deny it to the files API). */
  readonly file: string;
}

/** Single-quote for POSIX sh: every byte but NUL survives, including quotes and newlines. */
export function shellQuote(v: string): string {
  return `'${v.replace(/'/g, `'\\''`)}'`;
}

export function renderSecretsFile(secrets: Record<string, string>): string {
  const names = Object.keys(secrets).sort();
  return names.map((n) => `${n}=${shellQuote(secrets[n]!)}\n`).join('');
}

/** Parse a file written by renderSecretsFile (only that format; anything else is refused). */
export function parseSecretsFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const re = /([A-Z_][A-Z0-9_]*)='((?:[^']|'\\'')*)'\n/y;
  let m: RegExpExecArray | null;
  while (re.lastIndex < text.length && (m = re.exec(text))) out[m[1]!] = m[2]!.replace(/'\\''/g, "'");
  if (re.lastIndex !== text.length && text.length) throw new Error('secrets file is not in the expected format');
  return out;
}

/** The three-line profile script: it names the file and never holds a value. */
export function renderProfileScript(file: string): string {
  const q = shellQuote(file);
  return [
    '# computer: loads delivered secrets into login shells; this file holds no secret.',
    `if [ -r ${q} ]; then`,
    `  set -a; . ${q}; set +a; fi`,
  ].join('\n') + '\n';
}

export function isMemoryBacked(dir: string): boolean {
  const t = Number(fs.statfsSync(dir).type);
  return t === TMPFS_MAGIC || t === RAMFS_MAGIC;
}

async function defaultMountTmpfs(dir: string): Promise<void> {
  const r = await runClean('mount', ['-t', 'tmpfs', '-o', 'mode=0755,nosuid,nodev,noexec,size=16m', 'tmpfs', dir], {
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
  });
  if (r.code !== 0) throw new Error(`mount exited with ${r.code}`);
}

export function createSecretStore(opts: SecretStoreOptions): SecretStore {
  const file = path.join(opts.dir, SECRETS_FILE_NAME);
  const mountTmpfs = opts.mountTmpfs ?? defaultMountTmpfs;
  let current: Record<string, string> | null = null;
  let chain: Promise<unknown> = Promise.resolve();

  // One delivery at a time: replace and delete both rewrite the whole file.
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = chain.then(fn, fn);
    chain = run.catch(() => {});
    return run;
  };

  const user = (): UserInfo => {
    const u = lookupUser(opts.userName);
    if (!u) throw ERRORS.noSecretsUser();
    return u;
  };

  async function ensureMemoryDir(): Promise<void> {
    fs.mkdirSync(opts.dir, { recursive: true, mode: 0o755 });
    if (!isMemoryBacked(opts.dir)) {
      try {
        await mountTmpfs(opts.dir);
      } catch {
        /* checked below */
      }
      // Secrets must never reach a disk: refuse rather than fall back.
      if (!isMemoryBacked(opts.dir)) {
        throw ERRORS.secretsDirNotTmpfs();
      }
    }
    // Root-owned and not writable by others (a fresh tmpfs is 1777): nobody else can plant or swap
    // files beside secrets.env; readable and searchable so the agent user's login shell can source it.
    fs.chownSync(opts.dir, 0, 0);
    fs.chmodSync(opts.dir, 0o755);
  }

  function load(): Record<string, string> {
    if (current) return current;
    try {
      current = parseSecretsFile(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw ERRORS.secretsFileUnreadable();
      current = {};
    }
    return current;
  }

  async function writeAtomically(target: string, text: string, mode: number, uid: number, gid: number): Promise<void> {
    const dir = path.dirname(target);
    const tmp = path.join(dir, `.${path.basename(target)}.tmp-${randomBytes(6).toString('hex')}`);
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
    // Created 0600 from the first byte: a value never sits in a file others can read.
    const fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    try {
      fs.fchownSync(fd, uid, gid);
      fs.fchmodSync(fd, mode);
      fs.writeFileSync(fd, text);
      fs.fsyncSync(fd);
      fs.closeSync(fd);
      fs.renameSync(tmp, target);
    } catch (e) {
      try {
        fs.closeSync(fd);
      } catch {
        /* closed */
      }
      try {
        fs.unlinkSync(tmp);
      } catch {
        /* gone */
      }
      throw e;
    }
  }

  async function deliver(next: Record<string, string>): Promise<SecretsDelivered> {
    await ensureMemoryDir();
    const u = user();
    try {
      await writeAtomically(file, renderSecretsFile(next), 0o600, u.uid, u.gid);
      const script = renderProfileScript(file);
      let existing: string | null = null;
      try {
        existing = fs.readFileSync(opts.profileScript, 'utf8');
      } catch {
        /* absent */
      }
      if (existing !== script) {
        fs.mkdirSync(path.dirname(opts.profileScript), { recursive: true, mode: 0o755 });
        await writeAtomically(opts.profileScript, script, 0o644, 0, 0);
      }
    } catch (e) {
      if (e instanceof AppError) throw e;
      throw ERRORS.secretsNotDelivered(e);
    }
    current = next;
    return { names: Object.keys(next).sort(), delivered_at: new Date().toISOString() };
  }

  return {
    file,
    replace: (secrets) => serial(() => deliver({ ...secrets })),
    remove: (name) =>
      serial(async () => {
        const next = { ...load() };
        // Idempotent: revoking a name that is not delivered still answers the current set.
        delete next[name];
        return deliver(next);
      }),
    names: () => serial(async () => Object.keys(load()).sort()),
  };
}
