/**
 * Bearer secrets: browser session tokens, API keys, invitation and billing-link tokens. Only a
 * SHA-256 digest is stored; these are high-entropy random strings, so a fast hash is enough.
 */
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export function randomBase62(length: number): string {
  // Rejection sampling keeps every character uniform (256 is not a multiple of 62).
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 248 && out.length < length) out += BASE62[b % 62];
    }
  }
  return out;
}

/** One-shot (`crypto.hash`): no Hash object per call; every API key's request hashes its key once. */
export function sha256Hex(s: string): string {
  return hash('sha256', s, 'hex');
}

export function sameDigest(aHex: string, bHex: string): boolean {
  const a = Buffer.from(aHex, 'hex');
  const b = Buffer.from(bHex, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** API keys: `sk_` + 40 base62 characters (~238 bits). The stored prefix is the first 12 characters. */
export const API_KEY_RE = /^sk_[0-9A-Za-z]{40}$/;
export const API_KEY_PREFIX_LENGTH = 12;

export function newApiKey(): { secret: string; prefix: string; hash: string } {
  const secret = `sk_${randomBase62(40)}`;
  return { secret, prefix: secret.slice(0, API_KEY_PREFIX_LENGTH), hash: sha256Hex(secret) };
}

/** Session, invitation and billing-link tokens: 43 base62 characters (~256 bits). */
export function newOpaqueToken(): { token: string; hash: string } {
  const token = randomBase62(43);
  return { token, hash: sha256Hex(token) };
}

export const OPAQUE_TOKEN_RE = /^[0-9A-Za-z]{43}$/;
