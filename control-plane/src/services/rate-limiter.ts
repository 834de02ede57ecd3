import { sha256Hex } from '../auth/tokens.js';
import { RATE_RULES, rateAfterHit, rateDecision, type RateRuleName, type RateRules } from '../domain/rate-limits.js';
import type { Store } from '../store/store.js';
import { ERRORS } from '../errors.js';

/**
 * Counters kept in SQLite, so limits survive a restart. Bucket keys are hashed: the table never holds
 * an e-mail address or IP in clear. The decisions are domain/rate-limits.ts.
 */
export function createRateLimiter(store: Store, now: () => Date, rules: RateRules = RATE_RULES) {
  const bucket = (name: RateRuleName, subject: string) => `${name}:${sha256Hex(subject)}`;
  return {
    /** Throws 429 rate_limited with Retry-After when the subject may not try now. */
    assertAllowed(name: RateRuleName, subject: string): void {
      const d = rateDecision(rules[name], store.rateLimits.get(bucket(name, subject)), now().getTime());
      if (!d.allowed) {
        throw ERRORS.tooManyAttempts(d.retry_after_s);
      }
    },
    hit(name: RateRuleName, subject: string): void {
      const key = bucket(name, subject);
      store.db.tx(() => store.rateLimits.put(key, rateAfterHit(rules[name], store.rateLimits.get(key), now().getTime())));
    },
    clear(name: RateRuleName, subject: string): void {
      store.rateLimits.clear(bucket(name, subject));
    },
  };
}
export type RateLimiter = ReturnType<typeof createRateLimiter>;
