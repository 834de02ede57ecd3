import { sha256Hex } from '../auth/tokens.js';
import { RATE_RULES, rateAfterHit, rateDecision, type RateRuleName, type RateRules } from '../domain/rate-limits.js';
import type { Store } from '../store/store.js';
import { ERRORS } from '../errors.js';

/**
 * Counters kept in the store, so limits survive a restart and are shared by every process on one PostgreSQL. Bucket keys are hashed: the table never holds
 * an e-mail address or IP in clear. The decisions are domain/rate-limits.ts.
 */
export function createRateLimiter(store: Store, now: () => Date, rules: RateRules = RATE_RULES) {
  const bucket = (name: RateRuleName, subject: string) => `${name}:${sha256Hex(subject)}`;
  return {
    /** Throws 429 rate_limited with Retry-After when the subject may not try now. */
    async assertAllowed(name: RateRuleName, subject: string): Promise<void> {
      const d = rateDecision(rules[name], await store.rateLimits.get(bucket(name, subject)), now().getTime());
      if (!d.allowed) {
        throw ERRORS.tooManyAttempts(d.retry_after_s);
      }
    },
    async hit(name: RateRuleName, subject: string): Promise<void> {
      const key = bucket(name, subject);
      await store.db.tx(async () => {
        // Another process's hit of the same bucket waits here, then reads this one's count (never the same one).
        await store.rateLimits.lock(key);
        await store.rateLimits.put(key, rateAfterHit(rules[name], await store.rateLimits.get(key), now().getTime()));
      });
    },
    /**
     * assertAllowed then hit, in one transaction: of concurrent tries at the window's last allowance exactly
     * one passes (each one's check and count can no longer interleave with another's, in this process or another:
     * the bucket's lock is taken first).
     */
    admit(name: RateRuleName, subject: string): Promise<void> {
      return store.db.tx(async () => {
        await store.rateLimits.lock(bucket(name, subject));
        await this.assertAllowed(name, subject);
        await this.hit(name, subject);
      });
    },
    async clear(name: RateRuleName, subject: string): Promise<void> {
      await store.rateLimits.clear(bucket(name, subject));
    },
  };
}
export type RateLimiter = ReturnType<typeof createRateLimiter>;
