import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KeycodeResolver } from '../../agent/src/desktop/keycodes.js';
import { keysymForCodePoint } from '../../agent/src/desktop/keysyms.js';
import { X11KeymapClient } from '../../agent/src/desktop/x11-keymap.js';
import { startDesktopAgent, waitFor, xrun, type DesktopAgent } from '../helpers/desktop-agent.js';
import { nineScriptText } from '../helpers/mixed-scripts.js';

const UNICODE = 'Spaß naïve 日本語 ✓ Ωmega €5 «ok» x+y=z @home {a|b} ~`^';

/** An xterm whose shell reads one line into a file; the pointer over it gives it focus (no window manager). */
async function lineReader(a: DesktopAgent, tag: string): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kbd-${tag}-`));
  const out = path.join(dir, 'line');
  const ready = path.join(dir, 'ready');
  a.x('xterm', ['-geometry', '80x5+0+0', '-e', 'sh', '-c', `touch ${ready}; IFS= read -r line; printf %s "$line" > ${out}.tmp; mv ${out}.tmp ${out}`], {
    LC_ALL: 'C.UTF-8',
  });
  await waitFor(() => fs.existsSync(ready));
  // The window exists once the shell runs; give xterm a moment to map and select input.
  await waitFor(async () => (await xrun(a.xvfb.display, 'xdotool', ['search', '--onlyvisible', '--class', 'xterm'])).stdout.trim().length > 0);
  const mv = await a.client.request('POST', '/mouse/move', { x: 100, y: 30 });
  t.equal(mv.status, 200);
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return out;
}

async function typeLine(a: DesktopAgent, text: string, tag: string, delay_ms?: number): Promise<string> {
  const out = await lineReader(a, tag);
  const r = await a.client.request('POST', '/keyboard/type', delay_ms === undefined ? { text } : { text, delay_ms });
  t.equal(r.status, 200, 'type answers 200', { body: r.body.toString() });
  t.same(r.json().pointer, { x: 100, y: 30 });
  const k = await a.client.request('POST', '/keyboard/key', { key: 'Return' });
  t.equal(k.status, 200);
  await waitFor(() => fs.existsSync(out));
  return fs.readFileSync(out, 'utf8');
}

t.test('keyboard over the real channel', async (t) => {
  const a = await startDesktopAgent(t);

  t.test('type Unicode under the US layout', async (t) => {
    t.equal(await typeLine(a, UNICODE, 'us'), UNICODE);
  });

  t.test('type with a per-character delay', async (t) => {
    t.equal(await typeLine(a, 'ab✓', 'delay', 5), 'ab✓');
  });

  t.test('hotkey: ctrl+u erases the line typed so far', async (t) => {
    const out = await lineReader(a, 'hotkey');
    t.equal((await a.client.request('POST', '/keyboard/type', { text: 'discard me' })).status, 200);
    t.equal((await a.client.request('POST', '/keyboard/hotkey', { keys: ['ctrl', 'u'] })).status, 200);
    t.equal((await a.client.request('POST', '/keyboard/type', { text: 'kept' })).status, 200);
    t.equal((await a.client.request('POST', '/keyboard/key', { key: 'BackSpace', repeat: 2 })).status, 200);
    t.equal((await a.client.request('POST', '/keyboard/key', { key: 'Return' })).status, 200);
    await waitFor(() => fs.existsSync(out));
    t.equal(fs.readFileSync(out, 'utf8'), 'ke');
  });

  t.test('key down / up hold a key across calls', async (t) => {
    const out = await lineReader(a, 'hold');
    t.equal((await a.client.request('POST', '/keyboard/key', { key: 'Shift_L', down: true })).status, 200);
    t.equal((await a.client.request('POST', '/keyboard/key', { key: 'a' })).status, 200);
    t.equal((await a.client.request('POST', '/keyboard/key', { key: 'Shift_L', up: true })).status, 200);
    t.equal((await a.client.request('POST', '/keyboard/key', { key: 'a' })).status, 200);
    t.equal((await a.client.request('POST', '/keyboard/key', { key: 'Return' })).status, 200);
    await waitFor(() => fs.existsSync(out));
    t.equal(fs.readFileSync(out, 'utf8'), 'Aa');
  });

  t.test('type and key under a German layout (y/z swapped, AltGr symbols)', async (t) => {
    const r = await xrun(a.xvfb.display, 'setxkbmap', ['de']);
    t.equal(r.code, 0, 'setxkbmap de');
    t.teardown(() => xrun(a.xvfb.display, 'setxkbmap', ['us']));
    const text = 'yz YZ ' + UNICODE;
    t.equal(await typeLine(a, text, 'de'), text);
    const out = await lineReader(a, 'de-key');
    for (const key of ['y', 'z', 'at', 'udiaeresis']) t.equal((await a.client.request('POST', '/keyboard/key', { key })).status, 200);
    t.equal((await a.client.request('POST', '/keyboard/key', { key: 'Return' })).status, 200);
    await waitFor(() => fs.existsSync(out));
    t.equal(fs.readFileSync(out, 'utf8'), 'yz@ü');
  });

  t.test('more distinct characters than spare keycodes', async (t) => {
    let text = '';
    for (let cp = 0x3041; text.length < 120; cp++) text += String.fromCodePoint(cp);
    t.equal(await typeLine(a, text, 'many'), text);
  });

  t.test('1,000 characters of nine scripts: exact, with one round of key bindings', async (t) => {
    // Another X client counts the keymap changes (every ChangeKeyboardMapping reaches it as a MappingNotify).
    const watcher = await X11KeymapClient.connect(a.xvfb.number);
    t.teardown(() => watcher.close());
    const text = nineScriptText(1000);
    const before = watcher.generation;
    const got = await typeLine(a, text, 'nine');
    const changes = watcher.generation - before;
    t.equal(got, text, 'the xterm received exactly the text');
    // The 29 characters the layout lacks fit the 18 spare keycodes at once (two per keycode, the second with
    // Shift): one round binds them, at most one change per spare keycode. Rebinding per 18 characters, as
    // before, changed the keymap hundreds of times for this text (and took ~55 s).
    t.ok(changes >= 1 && changes <= 18, `keymap changed ${changes} times (one round: at most 18)`);
  });

  t.test("a restarted agent takes back the earlier agent's bindings, single and paired", async (t) => {
    // After the nine-script text, 14 spare keycodes hold two characters each and one holds é alone.
    const x = await X11KeymapClient.connect(a.xvfb.number);
    t.teardown(() => x.close());
    const fresh = new KeycodeResolver(x);
    await fresh.costOf([]);
    t.equal(fresh.spareCount, 18, 'all 18 spare keycodes are spare again for a new resolver');
    const keysyms = Array.from(nineScriptText(34), (ch) => keysymForCodePoint(ch.codePointAt(0)!));
    t.same(await fresh.costOf(keysyms), { strokes: 34, waitMs: 0 }, 'and it finds the 29 characters bound: nothing to bind, no wait');
  });

  t.test('a call that cannot finish within 25 s is refused before any key is sent', async (t) => {
    const watcher = await X11KeymapClient.connect(a.xvfb.number);
    t.teardown(() => watcher.close());
    const out = await lineReader(a, 'deadline');
    const before = watcher.generation;
    // 1,000 characters 30 ms apart: 30 s of delays alone.
    const slow = await a.client.request('POST', '/keyboard/type', { text: 'x'.repeat(1000), delay_ms: 30 });
    t.equal(slow.status, 400);
    t.equal(slow.json().error.code, 'invalid_request');
    t.same(slow.json().error.details, [{ field: 'delay_ms', message: 'needs about 31 s to type, more than 25 s' }]);
    // 20,000 characters cycling through 400 distinct CJK ones: 36 fit a bind round, each recycled keycode waits 1 s.
    let many = '';
    for (let i = 0; i < 20_000; i++) many += String.fromCodePoint(0x4e00 + (i % 400));
    const rebinding = await a.client.request('POST', '/keyboard/type', { text: many });
    t.equal(rebinding.status, 400);
    t.equal(rebinding.json().error.details[0].field, 'text');
    t.match(rebinding.json().error.message, /^Typing this would take about \d+ s; one keyboard\/type call may take at most 25 s/);
    t.equal(watcher.generation, before, 'no key was bound for either');
    const r = await a.client.request('POST', '/keyboard/type', { text: 'ok\n' });
    t.equal(r.status, 200);
    await waitFor(() => fs.existsSync(out));
    t.equal(fs.readFileSync(out, 'utf8'), 'ok', 'nothing of the refused calls was typed');
  });

  t.test('refusals', async (t) => {
    const unknown = await a.client.request('POST', '/keyboard/key', { key: 'NoSuchKeyName' });
    t.equal(unknown.status, 400);
    t.equal(unknown.json().error.code, 'invalid_request');
    t.same(unknown.json().error.details.map((d: { field: string }) => d.field), ['key']);
    const badRegex = await a.client.request('POST', '/keyboard/key', { key: 'ctrl+c' });
    t.equal(badRegex.status, 400);
    t.equal(badRegex.json().error.details[0].field, 'key');
    const hk = await a.client.request('POST', '/keyboard/hotkey', { keys: ['ctrl', 'Bogus_Key'] });
    t.equal(hk.status, 400);
    t.same(hk.json().error.details.map((d: { field: string }) => d.field), ['keys.1']);
    const both = await a.client.request('POST', '/keyboard/key', { key: 'a', down: true, up: true });
    t.equal(both.status, 400);
    const rep = await a.client.request('POST', '/keyboard/key', { key: 'a', repeat: 101 });
    t.equal(rep.status, 400);
    t.equal(rep.json().error.details[0].field, 'repeat');
    const empty = await a.client.request('POST', '/keyboard/type', { text: '' });
    t.equal(empty.status, 400);
    t.equal(empty.json().error.details[0].field, 'text');
    const extra = await a.client.request('POST', '/keyboard/type', { text: 'x', bogus: 1 });
    t.equal(extra.status, 400);
    const notJson = await a.client.request('POST', '/keyboard/type', Buffer.from('{nope'));
    t.equal(notJson.status, 400);
  });

  t.test('logs never carry typed text', async (t) => {
    await new Promise((r) => setTimeout(r, 50));
    const all = JSON.stringify(a.lines);
    for (const s of ['Spaß', 'naïve', '日本語', 'discard me', 'kept', 'NoSuchKeyName', 'Bogus_Key', 'udiaeresis']) {
      t.notOk(all.includes(s), `log never shows ${s}`);
    }
    t.ok(a.lines.some((l) => l.event === 'request' && l.route === '/keyboard/type' && l.status === 200));
  });
});
