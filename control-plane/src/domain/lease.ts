/**
 * The input lease: at most one session may send input to a machine's desktop. Pure decisions over the
 * stored lease row; the store applies them with compare-and-set on `fence` so concurrent acquires
 * cannot both win.
 *
 * Invariant: `fence` never decreases and increments on every grant (new holder, takeover, or a grant
 * after expiry or release). A renewal by the current holder keeps the fence.
 */
export interface LeaseRow {
  machine_id: string;
  /** null when released (the row survives so the fence keeps counting). */
  session_id: string | null;
  fence: number;
  /** epoch milliseconds */
  expires_at: number;
}

export interface AcquireInput {
  session_id: string;
  ttl_seconds: number;
  force: boolean;
  now: number;
}

export type AcquireDecision =
  | { kind: 'granted'; lease: { session_id: string; fence: number; expires_at: number }; revoked: string | null; renewed: false }
  | { kind: 'renewed'; lease: { session_id: string; fence: number; expires_at: number }; revoked: null; renewed: true }
  | { kind: 'conflict'; holder: string; fence: number; expires_at: number };

export function isHeld(row: LeaseRow | null, now: number): row is LeaseRow & { session_id: string } {
  return !!row && row.session_id !== null && row.expires_at > now;
}

export function decideAcquire(row: LeaseRow | null, input: AcquireInput): AcquireDecision {
  const fence = row?.fence ?? 0;
  const expires_at = input.now + input.ttl_seconds * 1000;
  if (isHeld(row, input.now)) {
    if (row.session_id === input.session_id) {
      return { kind: 'renewed', lease: { session_id: input.session_id, fence, expires_at }, revoked: null, renewed: true };
    }
    if (!input.force) return { kind: 'conflict', holder: row.session_id, fence, expires_at: row.expires_at };
    return { kind: 'granted', lease: { session_id: input.session_id, fence: fence + 1, expires_at }, revoked: row.session_id, renewed: false };
  }
  return { kind: 'granted', lease: { session_id: input.session_id, fence: fence + 1, expires_at }, revoked: null, renewed: false };
}

export type ReleaseDecision = { kind: 'released'; session_id: string; lease: LeaseRow & { session_id: string } } | { kind: 'not_held' } | { kind: 'not_holder'; holder: string };

/** Release by `session_id` (or by anyone allowed to release when `session_id` is null). */
export function decideRelease(row: LeaseRow | null, session_id: string | null, now: number): ReleaseDecision {
  if (!isHeld(row, now)) return { kind: 'not_held' };
  if (session_id !== null && row.session_id !== session_id) return { kind: 'not_holder', holder: row.session_id };
  return { kind: 'released', session_id: row.session_id, lease: row };
}

export type InputCheck = { ok: true; fence: number } | { ok: false; reason: 'no_lease' | 'not_holder' | 'stale_fence'; holder: string | null; fence: number };

/**
 * May `session_id` send input now? With `fence` given (X-Lease-Fence or an input message), it must equal
 * the current fence exactly: lower means the caller lost the lease, higher cannot have been granted.
 */
export function checkInput(row: LeaseRow | null, session_id: string, fence: number | null, now: number): InputCheck {
  if (!isHeld(row, now)) return { ok: false, reason: 'no_lease', holder: null, fence: row?.fence ?? 0 };
  if (row.session_id !== session_id) return { ok: false, reason: 'not_holder', holder: row.session_id, fence: row.fence };
  if (fence !== null && fence !== row.fence) return { ok: false, reason: 'stale_fence', holder: row.session_id, fence: row.fence };
  return { ok: true, fence: row.fence };
}
