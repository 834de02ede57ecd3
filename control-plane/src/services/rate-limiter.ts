import { AppError } from '../../../shared/errors.js';
import { sha256Hex } from '../auth/tokens.js';
import { RATE_RULES, windowAfterHit, windowDecision, type RateRule } from '../domain/rate-limits.js';
import type { Store } from '../store/store.js';

/**
 * Fixed-window counters kept in SQLite, so limits survive a restart. Bucket keys are hashed: the
 * table never holds an e-mail address or IP in clear.
 */
export function createRateLimiter(store: Store, now: () => Date, rules: Record<keyof typeof RATE_RULES, RateRule> = RATE_RULES) {
  const bucket = (rule: RateRule, subject: string) => `${rule.name}:${sha256Hex(subject)}`;
  return {
    /** Throws 429 rate_limited with Retry-After when the subject has used up its window. */
    assertAllowed(ruleName: keyof typeof RATE_RULES, subject: string): void {
      const rule = rules[ruleName];
      const d = windowDecision(rule, store.rateLimits.get(bucket(rule, subject)), now().getTime());
      if (!d.allowed) {
        throw new AppError('rate_limited', `Too many attempts; retry in ${d.retry_after_s} seconds.`, {
          headers: { 'retry-after': String(d.retry_after_s) },
        });
      }
    },
    hit(ruleName: keyof typeof RATE_RULES, subject: string): void {
      const rule = rules[ruleName];
      const key = bucket(rule, subject);
      store.db.tx(() => store.rateLimits.put(key, windowAfterHit(rule, store.rateLimits.get(key), now().getTime())));
    },
    clear(ruleName: keyof typeof RATE_RULES, subject: string): void {
      store.rateLimits.clear(bucket(rules[ruleName], subject));
    },
  };
}
export type RateLimiter = ReturnType<typeof createRateLimiter>;
