/**
 * Remembered keys (docs/security.md, "Remembered keys"): an API key's principal kept for `ttlMs` after it was read,
 * so a busy caller's requests skip the key's round trip to PostgreSQL (AUTH_CACHE_MS; 0 on SQLite, where the read is
 * in-process). Only a key that authenticated is remembered: a new key works at once and a bad one is read every
 * time. Keyed by the secret's SHA-256, never by the secret.
 *
 * Forgetting: the organization service calls `forget()` after every change that can take a key's power away or
 * narrow it (a key revoked, a member removed or leaving, a role changed), so on the process that made the change it
 * takes effect at once; every other process reads the key again within `ttlMs`.
 */
import type { OrgPrincipal } from '../context.js';
import { sha256Hex } from '../auth/tokens.js';

/** Keys remembered at most; the oldest goes first past it. */
const MAX_ENTRIES = 10_000;

export interface KeyCache {
  /** The key's principal: remembered if read less than `ttlMs` ago, else read (and remembered when valid). */
  principal(secret: string): Promise<OrgPrincipal | null>;
  /** Forgets every remembered key. */
  forget(): void;
}

export function keyCache(read: (secret: string) => Promise<OrgPrincipal | null>, o: { ttlMs: number; now?: () => number; maxEntries?: number }): KeyCache {
  const now = o.now ?? (() => performance.now());
  const max = o.maxEntries ?? MAX_ENTRIES;
  const entries = new Map<string, { principal: OrgPrincipal; at: number }>();
  // Bumped by forget(): a read that began before it is not remembered (it may have read what the change removed).
  let generation = 0;
  return {
    async principal(secret) {
      if (o.ttlMs <= 0) return read(secret);
      const id = sha256Hex(secret);
      const e = entries.get(id);
      if (e && now() - e.at < o.ttlMs) return e.principal;
      entries.delete(id);
      const began = generation;
      const at = now();
      const principal = await read(secret);
      if (principal && began === generation) {
        entries.set(id, { principal, at });
        for (const oldest of entries.keys()) {
          if (entries.size <= max) break;
          entries.delete(oldest);
        }
      }
      return principal;
    },
    forget() {
      generation++;
      entries.clear();
    },
  };
}
