/**
 * Pure parts of the dashboard: browser keys → input-channel messages, pointer mapping through the
 * letterboxed canvas, the screen's connection label, quota refusals, the desktop's readiness and a lost
 * lease read from events, and the page's Content-Security-Policy.
 */
import t from 'tap';
import { keyMessage } from '../../clients/dashboard/src/keys.js';
import { connLabel, desktopFromEvents, leaseLossFrom, quotaText, toDesktop } from '../../clients/dashboard/src/view-logic.js';
import { dashboardCsp } from '../../control-plane/src/dashboard.js';

const k = (key: string, mods: { ctrlKey?: boolean; altKey?: boolean; metaKey?: boolean; shiftKey?: boolean } = {}) =>
  keyMessage({ key, ctrlKey: false, altKey: false, metaKey: false, shiftKey: false, ...mods });

t.test('keys', async (t) => {
  t.same(k('a'), { type: 'keyboard.type', text: 'a' });
  t.same(k('A', { shiftKey: true }), { type: 'keyboard.type', text: 'A' }, 'shifted characters are typed as themselves');
  t.same(k('é'), { type: 'keyboard.type', text: 'é' });
  t.same(k(' '), { type: 'keyboard.type', text: ' ' });
  t.same(k('Enter'), { type: 'keyboard.key', key: 'Return' });
  t.same(k('Backspace'), { type: 'keyboard.key', key: 'BackSpace' });
  t.same(k('ArrowLeft'), { type: 'keyboard.key', key: 'Left' });
  t.same(k('PageDown'), { type: 'keyboard.key', key: 'Page_Down' });
  t.same(k('F5'), { type: 'keyboard.key', key: 'F5' });
  t.same(k('c', { ctrlKey: true }), { type: 'keyboard.hotkey', keys: ['ctrl', 'c'] });
  t.same(k('T', { ctrlKey: true, shiftKey: true }), { type: 'keyboard.hotkey', keys: ['ctrl', 'shift', 't'] });
  t.same(k('Tab', { altKey: true }), { type: 'keyboard.hotkey', keys: ['alt', 'Tab'] });
  t.same(k('l', { metaKey: true }), { type: 'keyboard.hotkey', keys: ['super', 'l'] });
  t.equal(k('Shift', { shiftKey: true }), null, 'a lone modifier sends nothing');
  t.equal(k('Dead'), null);
  t.equal(k('é', { ctrlKey: true }), null, 'no hotkey for a character without a key name');
});

t.test('pointer mapping through the letterboxed canvas', async (t) => {
  // A 1280x800 desktop in a 1000x800 element at (10, 20): scale 0.78125, 87.5 px bars above and below.
  const rect = { left: 10, top: 20, width: 1000, height: 800 };
  t.same(toDesktop(rect, 1280, 800, 10, 107.5), { x: 0, y: 0 });
  t.same(toDesktop(rect, 1280, 800, 510, 420), { x: 640, y: 400 });
  t.same(toDesktop(rect, 1280, 800, 244.375, 498.125), { x: 300, y: 500 });
  t.same(toDesktop(rect, 1280, 800, 5, 30), { x: 0, y: 0 }, 'the bars clamp to the edge');
  t.same(toDesktop(rect, 1280, 800, 2000, 2000), { x: 1279, y: 799 });
  // Bars left and right: 1280x800 in 1600x800 → scale 1, 160 px each side.
  t.same(toDesktop({ left: 0, top: 0, width: 1600, height: 800 }, 1280, 800, 460, 500), { x: 300, y: 500 });
});

t.test('connection label', async (t) => {
  t.equal(connLabel('connecting', 'running'), 'connecting');
  t.equal(connLabel('up', 'running'), 'live');
  t.equal(connLabel('down', 'running'), 'desktop starting');
  t.equal(connLabel('down', 'starting'), 'desktop starting');
  t.equal(connLabel('down', 'stopped'), 'machine stopped');
  t.equal(connLabel('reconnecting', 'stopping'), 'machine stopped');
  t.equal(connLabel('reconnecting', 'running'), 'reconnecting');
  t.equal(connLabel('deleted', 'running'), 'machine deleted');
  t.equal(connLabel('down', 'deleting'), 'machine deleted');
});

t.test('quota refusals are rendered from quota', async (t) => {
  const q = { limit: 'running_machines', current: 3, maximum: 3, plan_id: 'developer', upgrade_url: null } as const;
  t.equal(quotaText(q), 'Quota exceeded — running machines on plan developer: 3 used, maximum 3.');
  t.equal(quotaText({ ...q, limit: 'machines', current: 7, maximum: null, plan_id: 'enterprise' }),
    'Quota exceeded — machines on plan enterprise: 7 used, maximum negotiated.', 'null is negotiated, never unlimited');
  t.equal(quotaText({ ...q, limit: 'subscription', current: 0, maximum: 0, plan_id: 'none', upgrade_url: 'https://computer.example.com/billing' }),
    'Quota exceeded — subscription on plan none: 0 used, maximum 0. Upgrade: https://computer.example.com/billing');
  t.equal(quotaText({ ...q, limit: 'snapshots_per_machine', current: 10, maximum: 10 }), 'Quota exceeded — snapshots of this machine on plan developer: 10 used, maximum 10.');
});

t.test('the desktop is up after machine.ready since the machine began running', async (t) => {
  const since = '2026-11-26T10:00:00.000Z';
  const ev = (type: string, created_at: string) => ({ type, created_at });
  t.equal(desktopFromEvents([ev('session.connected', '2026-11-26T10:00:09.000Z'), ev('machine.ready', '2026-11-26T10:00:05.000Z')], since), 'up');
  t.equal(desktopFromEvents([ev('machine.ready', '2026-11-26T10:00:00.000Z')], since), 'up', 'ready in the same millisecond');
  t.equal(desktopFromEvents([ev('machine.started', '2026-11-26T10:00:00.000Z'), ev('machine.ready', '2026-11-26T09:59:00.000Z')], since), 'down', 'a boot since the last ready');
  t.equal(desktopFromEvents([ev('machine.restore_started', '2026-11-26T10:05:00.000Z'), ev('machine.ready', '2026-11-26T10:00:05.000Z')], since), 'down', 'a restore under way');
  t.equal(desktopFromEvents([ev('machine.ready', '2026-11-26T10:06:00.000Z'), ev('machine.restore_completed', '2026-11-26T10:06:01.000Z')].reverse(), since), 'up', 'a restore is done once ready');
  t.equal(desktopFromEvents([ev('machine.updated', '2026-11-26T10:00:05.000Z'), ev('machine.ready', '2026-11-26T09:59:59.999Z')], since), 'down', 'a ready of an earlier run');
  t.equal(desktopFromEvents([ev('machine.updated', '2026-11-26T10:00:05.000Z')], since), undefined, 'undecided: read older events');
  t.equal(desktopFromEvents([], since), undefined);
});

t.test('a lost lease read from events', async (t) => {
  const mine = 'ses_mine';
  t.equal(leaseLossFrom({ type: 'session.control_acquired', data: { session_id: mine, fence: 4 } }, mine, 4), null, 'this takeover itself');
  t.equal(leaseLossFrom({ type: 'session.control_released', data: { session_id: 'ses_before', fence: 3, reason: 'revoked' } }, mine, 4), null, 'the previous holder let go');
  t.equal(leaseLossFrom({ type: 'machine.updated', data: {} }, mine, 4), null);
  t.equal(leaseLossFrom({ type: 'session.control_released', data: { session_id: mine, fence: 4, reason: 'revoked' } }, mine, 4), 'lease revoked');
  t.equal(leaseLossFrom({ type: 'session.control_released', data: { session_id: mine, fence: 4, reason: 'machine_stopped' } }, mine, 4), 'lease machine stopped');
  t.equal(leaseLossFrom({ type: 'session.control_released', data: { session_id: mine, fence: 3, reason: 'expired' } }, mine, 4), null, 'an older grant of the same session');
  t.equal(leaseLossFrom({ type: 'session.control_acquired', data: { session_id: 'ses_other', fence: 5 } }, mine, 4), 'taken over');
  t.equal(leaseLossFrom({ type: 'session.control_acquired', data: { session_id: 'ses_other', fence: 4 } }, mine, 4), null, 'not newer than this grant');
});

t.test('content security policy', async (t) => {
  t.equal(
    dashboardCsp('https://computer.example.com'),
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self'; connect-src 'self' wss://computer.example.com; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  );
  t.match(dashboardCsp('http://127.0.0.1:8080'), /connect-src 'self' ws:\/\/127\.0\.0\.1:8080;/);
});
