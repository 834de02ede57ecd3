/**
 * Secrets at rest: AES-256-GCM under a keyring. Pure apart from the random source (node:crypto).
 *
 * A keyring holds one or more 256-bit keys, each with an id; exactly one is active and seals every new
 * ciphertext. Each ciphertext records the id of the key that sealed it, so a rotation can add a key,
 * re-seal under it and retire the old one while anything not yet re-sealed still opens.
 *
 * Sealed blob: iv (12 bytes, random per seal) ‖ tag (16 bytes) ‖ ciphertext. The associated data binds
 * organization, machine, name and version: a ciphertext copied to another row (another machine, name or
 * an older version) fails to open instead of yielding a value.
 *
 * Errors never carry key material, plaintext or ciphertext.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { z } from 'zod';

export const KEYRING_FORMAT = 'computer-secrets-keyring/1';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID_RE = /^kr_[0-9a-f]{16}$/;

export interface Keyring {
  /** Id of the key that seals new ciphertexts. */
  active: string;
  keys: ReadonlyArray<{ id: string; created_at: string; key: Buffer }>;
}

/** What a sealed value is bound to (the associated data). */
export interface SecretBinding {
  org_id: string;
  machine_id: string;
  name: string;
  version: number;
}

export interface Sealed {
  key_id: string;
  blob: Buffer;
}

/** Why a ciphertext did not open. The message names neither the key nor the data. */
export class SecretOpenError extends Error {
  constructor(readonly reason: 'unknown_key' | 'malformed' | 'authentication_failed') {
    super(`the secret could not be decrypted (${reason})`);
    this.name = 'SecretOpenError';
  }
}

const KeyringFile = z.strictObject({
  format: z.literal(KEYRING_FORMAT),
  active: z.string().regex(KEY_ID_RE),
  keys: z
    .array(
      z.strictObject({
        id: z.string().regex(KEY_ID_RE),
        created_at: z.string(),
        key: z.string().regex(/^[A-Za-z0-9+/]{43}=$/, 'a base64 256-bit key'),
      }),
    )
    .min(1),
});

/** Parse a keyring file's text. Throws a message that never quotes the file (it holds keys). */
export function parseKeyring(text: string): Keyring {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error('the secrets keyring is not valid JSON');
  }
  const r = KeyringFile.safeParse(json);
  if (!r.success) {
    const where = r.error.issues[0]?.path.join('.') || 'top level';
    throw new Error(`the secrets keyring is not in the ${KEYRING_FORMAT} format (at ${where})`);
  }
  const ids = new Set(r.data.keys.map((k) => k.id));
  if (ids.size !== r.data.keys.length) throw new Error('the secrets keyring repeats a key id');
  if (!ids.has(r.data.active)) throw new Error('the secrets keyring names an active key it does not hold');
  return {
    active: r.data.active,
    keys: r.data.keys.map((k) => ({ id: k.id, created_at: k.created_at, key: Buffer.from(k.key, 'base64') })),
  };
}

export function serializeKeyring(k: Keyring): string {
  return JSON.stringify(
    { format: KEYRING_FORMAT, active: k.active, keys: k.keys.map((x) => ({ id: x.id, created_at: x.created_at, key: x.key.toString('base64') })) },
    null,
    2,
  ) + '\n';
}

function newKey(now: Date): Keyring['keys'][number] {
  return { id: `kr_${randomBytes(8).toString('hex')}`, created_at: now.toISOString(), key: randomBytes(KEY_BYTES) };
}

export function newKeyring(now: Date): Keyring {
  const k = newKey(now);
  return { active: k.id, keys: [k] };
}

/** A keyring with one more key, which becomes the active one; the others stay so old ciphertexts open. */
export function withNewActiveKey(k: Keyring, now: Date): Keyring {
  const n = newKey(now);
  return { active: n.id, keys: [...k.keys, n] };
}

/** Drop every key that is neither active nor in `used` (the key ids some ciphertext still names). */
export function retireUnusedKeys(k: Keyring, used: ReadonlySet<string>): { keyring: Keyring; retired: string[] } {
  const keep = k.keys.filter((x) => x.id === k.active || used.has(x.id));
  return { keyring: { active: k.active, keys: keep }, retired: k.keys.filter((x) => !keep.includes(x)).map((x) => x.id) };
}

/** The associated data: unambiguous (JSON array) and versioned, so the binding can evolve. */
export function bindingAad(b: SecretBinding): Buffer {
  return Buffer.from(JSON.stringify(['computer.secret/1', b.org_id, b.machine_id, b.name, b.version]), 'utf8');
}

export function seal(k: Keyring, b: SecretBinding, plaintext: string): Sealed {
  const key = k.keys.find((x) => x.id === k.active)!.key;
  const iv = randomBytes(IV_BYTES);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(bindingAad(b));
  const ct = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
  return { key_id: k.active, blob: Buffer.concat([iv, c.getAuthTag(), ct]) };
}

export function open(k: Keyring, sealed: Sealed, b: SecretBinding): string {
  const key = k.keys.find((x) => x.id === sealed.key_id)?.key;
  if (!key) throw new SecretOpenError('unknown_key');
  if (sealed.blob.length < IV_BYTES + TAG_BYTES) throw new SecretOpenError('malformed');
  const d = createDecipheriv('aes-256-gcm', key, sealed.blob.subarray(0, IV_BYTES));
  d.setAAD(bindingAad(b));
  d.setAuthTag(sealed.blob.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  try {
    const pt = Buffer.concat([d.update(sealed.blob.subarray(IV_BYTES + TAG_BYTES)), d.final()]);
    return pt.toString('utf8');
  } catch {
    throw new SecretOpenError('authentication_failed');
  }
}
