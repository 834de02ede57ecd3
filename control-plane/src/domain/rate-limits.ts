/**
 * Rate-limit numbers and the fixed-window decision. Only signups (per client IP) and failed logins
 * (per e-mail) are limited by the API; a successful login clears its e-mail's counter.
 */
export interface RateRule {
  name: 'signup_ip' | 'login_failure_email';
  max: number;
  window_ms: number;
}

export const RATE_RULES = {
  signup_ip: { name: 'signup_ip', max: 10, window_ms: 60 * 60 * 1000 },
  login_failure_email: { name: 'login_failure_email', max: 10, window_ms: 15 * 60 * 1000 },
} as const satisfies Record<string, RateRule>;

export interface WindowState {
  window_start_ms: number;
  count: number;
}

/** Is one more event allowed now? If not, how many whole seconds until the window ends. */
export function windowDecision(rule: RateRule, state: WindowState | undefined, now: number): { allowed: true } | { allowed: false; retry_after_s: number } {
  if (!state || now - state.window_start_ms >= rule.window_ms) return { allowed: true };
  if (state.count < rule.max) return { allowed: true };
  return { allowed: false, retry_after_s: Math.max(1, Math.ceil((state.window_start_ms + rule.window_ms - now) / 1000)) };
}

/** The window after recording one event. */
export function windowAfterHit(rule: RateRule, state: WindowState | undefined, now: number): WindowState {
  if (!state || now - state.window_start_ms >= rule.window_ms) return { window_start_ms: now, count: 1 };
  return { window_start_ms: state.window_start_ms, count: state.count + 1 };
}
