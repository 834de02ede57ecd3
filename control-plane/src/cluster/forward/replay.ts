/**
 * The nonces a process has accepted, so a captured signed request is served at most once. Bounded in time: a
 * nonce is only needed while its timestamp is inside the window, and a timestamp accepted at `now` is at most
 * `now + window`, so each is kept until `now + 2 × window` (insertion order is then expiry order: pruning pops
 * from the front). Bounded in size: when full of live nonces, a new one is refused (the request is answered
 * 401, never served unremembered); only a holder of the deployment key can fill it, since a nonce is recorded
 * after its signature holds.
 */
export interface ReplayCacheOptions {
  /** The timestamp window (± milliseconds). */
  windowMs: number;
  /** Live nonces held at most. */
  maxEntries: number;
}

export type NonceVerdict = 'fresh' | 'replayed' | 'full';

export class ReplayCache {
  readonly #seen = new Map<string, number>();

  constructor(private readonly o: ReplayCacheOptions) {}

  /** Records `nonce` as seen at `now` unless it was seen already (or there is no room). */
  admit(nonce: string, now: number): NonceVerdict {
    for (const [n, until] of this.#seen) {
      if (until > now) break;
      this.#seen.delete(n);
    }
    if (this.#seen.has(nonce)) return 'replayed';
    if (this.#seen.size >= this.o.maxEntries) return 'full';
    this.#seen.set(nonce, now + 2 * this.o.windowMs);
    return 'fresh';
  }

  get size(): number {
    return this.#seen.size;
  }
}
