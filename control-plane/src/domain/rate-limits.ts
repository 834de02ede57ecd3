/**
 * Rate-limit numbers and decisions. Only signups (per client IP) and failed logins are limited by the
 * API (the spec: "failed logins per e-mail, signups per IP; a successful login clears the counter").
 *
 * Failed logins are counted per (e-mail, client IP) with exponential backoff, plus a looser fixed window
 * per client IP across all addresses. Security invariant: failures from one IP never slow down logins to
 * the same address from another IP, so an attacker cannot lock a user out by failing on purpose (the
 * old per-e-mail hard lock let anyone do that); a guesser is slowed per (address, IP) and capped per IP.
 */
export interface WindowRule {
  kind: 'window';
  name: 'signup_ip' | 'login_failure_ip';
  max: number;
  window_ms: number;
}

/** `free` failures pass; then each attempt waits base × 2^(failures − free), at most `max_ms`. */
export interface BackoffRule {
  kind: 'backoff';
  name: 'login_failure_email_ip';
  free: number;
  base_ms: number;
  max_ms: number;
  /** The count is forgotten this long after the last failure. */
  forget_ms: number;
}

export type RateRule = WindowRule | BackoffRule;
export type RateRuleName = RateRule['name'];

export type RateRules = { [K in RateRuleName]: RateRule };

export const RATE_RULES: RateRules = {
  signup_ip: { kind: 'window', name: 'signup_ip', max: 10, window_ms: 60 * 60 * 1000 },
  login_failure_ip: { kind: 'window', name: 'login_failure_ip', max: 100, window_ms: 15 * 60 * 1000 },
  login_failure_email_ip: { kind: 'backoff', name: 'login_failure_email_ip', free: 5, base_ms: 1000, max_ms: 15 * 60 * 1000, forget_ms: 60 * 60 * 1000 },
};

/**
 * Stored per bucket. For a window rule: when the window started and how many events it holds. For a
 * backoff rule: when the last failure was and how many failures in a row.
 */
export interface WindowState {
  window_start_ms: number;
  count: number;
}

export type RateDecision = { allowed: true } | { allowed: false; retry_after_s: number };

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

/** Is one more event allowed now? If not, how many whole seconds until it is. */
export function rateDecision(rule: RateRule, state: WindowState | undefined, now: number): RateDecision {
  if (rule.kind === 'window') {
    if (!state || now - state.window_start_ms >= rule.window_ms) return { allowed: true };
    if (state.count < rule.max) return { allowed: true };
    return { allowed: false, retry_after_s: seconds(state.window_start_ms + rule.window_ms - now) };
  }
  if (!state || now - state.window_start_ms >= rule.forget_ms || state.count < rule.free) return { allowed: true };
  const wait = backoffWait(rule, state.count);
  if (now - state.window_start_ms >= wait) return { allowed: true };
  return { allowed: false, retry_after_s: seconds(state.window_start_ms + wait - now) };
}

/** The wait after `failures` failures in a row (0 while they are within the free ones). */
export function backoffWait(rule: BackoffRule, failures: number): number {
  if (failures < rule.free) return 0;
  return Math.min(rule.max_ms, rule.base_ms * 2 ** Math.min(failures - rule.free, 40));
}

/** The state after recording one event. */
export function rateAfterHit(rule: RateRule, state: WindowState | undefined, now: number): WindowState {
  if (rule.kind === 'window') {
    if (!state || now - state.window_start_ms >= rule.window_ms) return { window_start_ms: now, count: 1 };
    return { window_start_ms: state.window_start_ms, count: state.count + 1 };
  }
  if (!state || now - state.window_start_ms >= rule.forget_ms) return { window_start_ms: now, count: 1 };
  return { window_start_ms: now, count: state.count + 1 };
}
