/** Pure decisions of the screen view (no DOM), unit-tested in test/dashboard/view-logic.test.ts. */
import type { MachineState } from '../../../shared/schemas/machine.js';
import type { ErrorEnvelopeBody } from '../../../shared/schemas/responses.js';

export type Quota = NonNullable<ErrorEnvelopeBody['error']['quota']>;

const QUOTA_LABELS: Record<Quota['limit'], string> = {
  running_machines: 'running machines',
  machines: 'machines',
  templates: 'templates',
  members: 'members',
  concurrent_sessions: 'concurrent sessions',
  snapshots_per_machine: 'snapshots of this machine',
  subscription: 'subscription',
};

/**
 * A quota refusal as the page shows it: the entitlement, what is used and the maximum. A null maximum is
 * negotiated (an enterprise agreement decides it), never unlimited.
 */
export function quotaText(q: Quota): string {
  const max = q.maximum === null ? 'negotiated' : String(q.maximum);
  const upgrade = q.upgrade_url ? ` Upgrade: ${q.upgrade_url}` : '';
  return `Quota exceeded — ${QUOTA_LABELS[q.limit]} on plan ${q.plan_id}: ${q.current} used, maximum ${max}.${upgrade}`;
}

/** What the screen socket says; shown together with the machine's state (a stopped machine is not "reconnecting"). */
export type Socket = 'connecting' | 'up' | 'down' | 'reconnecting' | 'deleted';
export type Conn = 'connecting' | 'live' | 'desktop starting' | 'machine stopped' | 'reconnecting' | 'machine deleted';

export function connLabel(socket: Socket, state: MachineState): Conn {
  if (socket === 'up') return 'live';
  if (socket === 'deleted' || state === 'deleting') return 'machine deleted';
  if (state === 'stopped' || state === 'stopping') return 'machine stopped';
  if (socket === 'down') return 'desktop starting';
  return socket;
}

/**
 * Where the desktop image sits inside the canvas element: CSS scales it with `object-fit: contain`, so it is
 * letterboxed when the element's aspect differs from the desktop's.
 */
export function fitted(rect: { left: number; top: number; width: number; height: number }, w: number, h: number) {
  const scale = Math.min(rect.width / w, rect.height / h);
  return { scale, left: rect.left + (rect.width - w * scale) / 2, top: rect.top + (rect.height - h * scale) / 2 };
}

/** A client pixel → the desktop pixel under it, clamped to the desktop. */
export function toDesktop(rect: { left: number; top: number; width: number; height: number }, w: number, h: number, clientX: number, clientY: number) {
  const f = fitted(rect, w, h);
  const x = Math.round((clientX - f.left) / f.scale);
  const y = Math.round((clientY - f.top) / f.scale);
  return { x: Math.max(0, Math.min(w - 1, x)), y: Math.max(0, Math.min(h - 1, y)) };
}

/** Events after which the desktop is not (yet) up: a boot begins or the machine goes away. */
const DESKTOP_DOWN_EVENTS = new Set([
  'machine.created', 'machine.started', 'machine.stopped', 'machine.failed', 'machine.deleted', 'machine.restore_started',
]);

/**
 * Events (newest first) → is the desktop of a machine running since `since` up? `machine.ready` says up; a
 * boot, stop, failure or restore newer than any ready, or reaching events older than `since`, says down;
 * undefined when these events do not decide (read older ones).
 */
export function desktopFromEvents(events: ReadonlyArray<{ type: string; created_at: string }>, since: string): 'up' | 'down' | undefined {
  for (const e of events) {
    if (e.created_at < since) return 'down';
    if (e.type === 'machine.ready') return 'up';
    if (DESKTOP_DOWN_EVENTS.has(e.type)) return 'down';
  }
  return undefined;
}

/**
 * An event on the machine → why the holder of grant `fence` (session `session`) lost control, or null: its
 * grant released (stop, session closed, expiry, another's takeover) or a newer grant to someone else.
 */
export function leaseLossFrom(e: { type: string; data: Record<string, unknown> }, session: string, fence: number): string | null {
  if (e.type === 'session.control_released' && e.data.session_id === session && e.data.fence === fence) {
    return `lease ${String(e.data.reason ?? 'released').replaceAll('_', ' ')}`;
  }
  if (e.type === 'session.control_acquired' && e.data.session_id !== session && typeof e.data.fence === 'number' && e.data.fence > fence) {
    return 'taken over';
  }
  return null;
}
