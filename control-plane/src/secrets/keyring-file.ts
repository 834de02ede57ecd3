/**
 * The keyring file named by SECRETS_KEYRING (default `<DATA_DIR>/secrets-keyring.json`, created on first
 * run; `off` disables secrets). The file is re-read whenever it changes on disk, so the operator CLI can
 * rotate keys while the server runs; callers read it inside the database transaction that uses it, which
 * orders them against a rotation (that rewrites the file inside its own transaction).
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Config } from '../config.js';
import { newKeyring, parseKeyring, serializeKeyring, type Keyring } from './crypto.js';

export const KEYRING_FILENAME = 'secrets-keyring.json';

/** Where the keyring lives, or null when the operator turned secrets off. */
export function keyringPath(config: Pick<Config, 'secretsKeyring' | 'dataDir'>): { path: string; isDefault: boolean } | null {
  if (config.secretsKeyring === 'off') return null;
  if (config.secretsKeyring) return { path: path.resolve(config.secretsKeyring), isDefault: false };
  return { path: path.resolve(config.dataDir, KEYRING_FILENAME), isDefault: true };
}

export interface KeyringSource {
  /** The keyring as the file holds it now. */
  current(): Keyring;
}

export class KeyringFile implements KeyringSource {
  private cached: { keyring: Keyring; stamp: string } | null = null;

  constructor(readonly path: string) {}

  private stamp(st: fs.Stats): string {
    return `${st.ino}:${st.size}:${st.mtimeMs}`;
  }

  current(): Keyring {
    const st = fs.statSync(this.path);
    const stamp = this.stamp(st);
    if (this.cached?.stamp === stamp) return this.cached.keyring;
    // Keys must not be readable by anyone but the server's user (as ssh insists for its keys).
    if ((st.mode & 0o077) !== 0) {
      throw new Error(`the secrets keyring ${this.path} is readable or writable by others; run chmod 600 on it`);
    }
    const keyring = parseKeyring(fs.readFileSync(this.path, 'utf8'));
    this.cached = { keyring, stamp };
    return keyring;
  }

  /** Replace the file atomically, 0600 from its first byte. */
  write(k: Keyring): void {
    this.install(k, (tmp) => fs.renameSync(tmp, this.path));
  }

  /**
   * Create the file only if it does not exist (link(2) refuses an existing name), so two processes
   * starting on a fresh data directory cannot each write a different first key.
   */
  createIfAbsent(k: Keyring): boolean {
    let created = true;
    this.install(k, (tmp) => {
      try {
        fs.linkSync(tmp, this.path);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        created = false;
      }
      fs.rmSync(tmp, { force: true });
    });
    return created;
  }

  private install(k: Keyring, place: (tmp: string) => void): void {
    const tmp = path.join(path.dirname(this.path), `.${path.basename(this.path)}.${randomBytes(6).toString('hex')}.tmp`);
    const fd = fs.openSync(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
    try {
      fs.writeFileSync(fd, serializeKeyring(k));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    try {
      place(tmp);
    } catch (e) {
      fs.rmSync(tmp, { force: true });
      throw e;
    }
    this.cached = null;
  }
}

/**
 * Open the configured keyring. The default file is created on first run (and `say` tells the operator,
 * because losing it makes every stored secret unreadable); a keyring the operator named must exist.
 * When the database already holds sealed secrets (`sealedSecrets` > 0) a missing default file is not
 * created either: a new keyring could open none of them, so the keyring was lost and must be restored.
 */
export function openKeyring(
  config: Pick<Config, 'secretsKeyring' | 'dataDir'>,
  say: (line: string) => void = () => {},
  o: { now?: () => Date; sealedSecrets?: number } = {},
): KeyringFile | null {
  const where = keyringPath(config);
  if (!where) return null;
  const file = new KeyringFile(where.path);
  if (!fs.existsSync(where.path)) {
    if (!where.isDefault) throw new Error(`SECRETS_KEYRING names ${where.path}, which does not exist`);
    if (o.sealedSecrets) {
      throw new Error(
        `the secrets keyring ${where.path} is missing but the database holds ${o.sealedSecrets} secret(s) sealed under it; ` +
          'restore the keyring file from the backup made with the database (or name it with SECRETS_KEYRING). ' +
          'Refusing to create a new keyring, which could open none of them.',
      );
    }
    fs.mkdirSync(path.dirname(where.path), { recursive: true, mode: 0o700 });
    if (file.createIfAbsent(newKeyring((o.now ?? (() => new Date()))()))) say(`secrets: created the keyring ${where.path} (mode 0600). Back it up with the database: without it stored secrets cannot be decrypted.`);
  }
  file.current();
  return file;
}
