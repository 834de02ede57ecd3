/**
 * Input as a real Chromium page sees it (DOM events read back through DevTools): multi-clicks that
 * Chromium counts as such, and Unicode typed into a text field arriving exactly.
 */
import t, { type Test } from 'tap';
import { decodeToRgb, type RawFrame } from '../../agent/src/desktop/screen.js';
import { openChromiumPage, type ChromiumPage } from '../helpers/chromium-page.js';
import { heldModeReads, startDesktopAgent, waitFor, type DesktopAgent } from '../helpers/desktop-agent.js';
import { nineScriptText } from '../helpers/mixed-scripts.js';

// A text field at the top, a pad for clicks below it. Every mouse event is recorded with its detail
// (the click count), button and modifiers; loadId tells a reload apart. The pad is not selectable:
// a shift-click would otherwise select across it, and a later press on the selection starts a
// drag-and-drop, which ends without a mouseup.
const HTML = `<!doctype html><html><head><meta charset="utf-8"></head>
<body style="margin:0;height:100vh;overflow:hidden">
<textarea id="ta" style="position:absolute;left:0;top:0;width:900px;height:300px" spellcheck="false"></textarea>
<div id="pad" style="position:absolute;left:0;top:320px;right:0;bottom:0;background:#ddd;user-select:none"></div>
<div id="box" style="position:absolute;left:1000px;top:40px;width:120px;height:80px;background:rgb(255,0,0)"></div>
<div id="opener" style="position:absolute;left:950px;top:400px;width:100px;height:40px;background:#888"></div>
<div id="menu" style="position:absolute;left:950px;top:450px;width:200px;height:150px;display:none"></div>
<div id="spin" style="position:absolute;left:1150px;top:400px;width:50px;height:50px"></div>
<button id="go" style="position:absolute;left:1130px;top:200px;width:120px;height:40px">Go</button>
<script>
window.loadId = String(Math.random());
window.ev = [];
for (const k of ['mousedown', 'mouseup', 'click', 'dblclick', 'wheel']) {
  addEventListener(k, (e) => ev.push({ type: k, detail: e.detail, button: e.button, sx: e.screenX, sy: e.screenY,
    shift: e.shiftKey, ctrl: e.ctrlKey, alt: e.altKey, meta: e.metaKey, dy: e.deltaY ?? null }), { capture: true, passive: true });
}
// The "menu" opens in stages, like an animated one: appears 100 ms after the click, final colour 150 ms later.
document.getElementById('opener').addEventListener('click', () => {
  const m = document.getElementById('menu');
  setTimeout(() => { m.style.display = 'block'; m.style.background = 'rgb(0,0,255)'; }, 100);
  setTimeout(() => { m.style.background = 'rgb(0,255,0)'; }, 250);
});
// Pointer records of the drag test only (mousemove would flood the other tests): type, screen position, buttons held.
window.moves = null;
for (const k of ['mousedown', 'mousemove', 'mouseup']) {
  addEventListener(k, (e) => { if (window.moves) moves.push(k + ' ' + e.screenX + ',' + e.screenY + ' ' + e.buttons); }, { capture: true, passive: true });
}
window.spin = () => { const s = document.getElementById('spin'); let i = 0;
  window.spinning = setInterval(() => { s.style.background = (i++ % 2) ? 'black' : 'white'; }, 30); };
window.ready = true;
</script></body></html>`;

interface Ev {
  type: string;
  detail: number;
  button: number;
  sx: number;
  sy: number;
  shift: boolean;
  ctrl: boolean;
  alt: boolean;
  meta: boolean;
}

let a: DesktopAgent;
let page: ChromiumPage;
let loadId: string;
const reads = heldModeReads();

t.before(async () => {
  a = await startDesktopAgent(t, { modes: reads.io });
  page = await openChromiumPage(t, a.xvfb.display, HTML);
  loadId = await page.eval<string>('window.loadId');
});

/** Wait until `n` events of `type` were recorded, then take (and clear) all recorded events. */
async function take(type: string, n: number): Promise<Ev[]> {
  await waitFor(() => page.eval<boolean>(`ev.filter((e) => e.type === ${JSON.stringify(type)}).length >= ${n}`), 10_000, 5).catch(async (e: Error) => {
    throw new Error(`${e.message}: ${n} ${type} events; recorded: ${JSON.stringify(await page.eval('ev')).slice(0, 600)}`);
  });
  return page.eval<Ev[]>('ev.splice(0)');
}

t.test('double and triple clicks are counted by Chromium every time (50 each)', async (t) => {
  for (const count of [2, 3]) {
    let exact = 0;
    const seen: string[] = [];
    for (let i = 0; i < 50; i++) {
      // Each multi-click 40 px from the previous one: never a continuation of it.
      const at = { x: 100 + (i % 25) * 40, y: 500 + count * 100 + Math.floor(i / 25) * 20 };
      const r = await a.client.request('POST', '/mouse/click', { at, count });
      if (r.status !== 200) t.fail(`click answered ${r.status}`);
      const ev = await take('click', count);
      const details = ev.filter((e) => e.type === 'mousedown').map((e) => e.detail);
      const dbl = ev.filter((e) => e.type === 'dblclick').length;
      const want = count === 2 ? [1, 2] : [1, 2, 3];
      if (JSON.stringify(details) === JSON.stringify(want) && dbl === 1) exact++;
      else seen.push(`${details.join(',')} dblclick=${dbl}`);
    }
    t.equal(exact, 50, `count ${count}: mousedown.detail ${count === 2 ? '1,2' : '1,2,3'} and one dblclick in 50 of 50 (others: ${seen.join('; ')})`);
  }
  t.equal(await page.eval('window.loadId'), loadId, 'no reload');
});

/** Clicks the text field, empties it, types `text` through the agent and checks the field holds exactly it, with no reload or navigation. */
async function typeIntoField(t: Test, text: string): Promise<void> {
  const click = await a.client.request('POST', '/mouse/click', { at: { x: 200, y: 100 } });
  t.equal(click.status, 200);
  await waitFor(() => page.eval<boolean>("document.activeElement === document.getElementById('ta')"), 10_000, 20);
  await page.eval("document.getElementById('ta').value = ''");
  const r = await a.client.request('POST', '/keyboard/type', { text });
  t.equal(r.status, 200);
  const got = await waitFor(async () => {
    const v = await page.eval<string>("document.getElementById('ta').value");
    return v.length >= text.length ? v : null;
  }, 20_000, 50).catch(async () => page.eval<string>("document.getElementById('ta').value"));
  t.equal(got, text, 'the field holds exactly the text');
  t.equal(await page.eval('window.loadId'), loadId, 'no reload');
  t.equal(await page.eval('location.href'), page.url, 'no navigation');
}

t.test('500 mixed Unicode characters typed into a text field arrive exactly, without navigation', async (t) => {
  const pieces = [
    'こんにちは世界、日本語の文章です。',
    'Ελληνικά: αβγδεζηθ ΩΨΦ λόγος',
    ' 😀🎉👍🚀 ',
    'àéîõü çñ ÀÉÎÕÜ ßøå œ',
    ' .,;:!?()[]{}<>"\'`~@#$%^&*-_=+|\\/ ',
    'カタカナとひらがな',
  ];
  let text = '';
  for (let i = 0; Array.from(text).length < 500; i++) text += pieces[i % pieces.length];
  text = Array.from(text).slice(0, 500).join('');
  t.equal(Array.from(text).length, 500);
  await typeIntoField(t, text);
  t.equal(await page.eval('history.length'), 1, 'no history entry added');
});

t.test('1,000 characters of nine scripts (29 outside the layout, typed two per keycode) arrive exactly', async (t) => {
  const text = nineScriptText(1000);
  await typeIntoField(t, text);
});

t.test('extension: modifiers held for exactly a click, drag or scroll', async (t) => {
  const mods = (e: Ev) => ['shift', 'ctrl', 'alt', 'meta'].filter((m) => e[m as 'shift' | 'ctrl' | 'alt' | 'meta']).join('+');
  await page.eval('ev.splice(0)');
  let r = await a.client.request('POST', '/mouse/click', { at: { x: 300, y: 700 }, modifiers: ['shift', 'ctrl'] });
  t.equal(r.status, 200);
  let ev = await take('click', 1);
  t.same(ev.filter((e) => e.type !== 'wheel').map((e) => `${e.type}:${mods(e)}`), ['mousedown:shift+ctrl', 'mouseup:shift+ctrl', 'click:shift+ctrl']);

  r = await a.client.request('POST', '/mouse/click', { at: { x: 400, y: 700 } });
  ev = await take('click', 1);
  t.same(ev.map((e) => `${e.type}:${mods(e)}`), ['mousedown:', 'mouseup:', 'click:'], 'released afterwards');

  r = await a.client.request('POST', '/mouse/click', { at: { x: 500, y: 700 }, count: 2, modifiers: ['shift'] });
  ev = await take('click', 2);
  t.same(
    ev.filter((e) => e.type === 'mousedown').map((e) => `${e.detail}:${mods(e)}`),
    ['1:shift', '2:shift'],
    'held across both presses of a double click',
  );

  r = await a.client.request('POST', '/mouse/drag', { from: { x: 600, y: 700 }, to: { x: 700, y: 750 }, steps: 3, modifiers: ['alt'] });
  t.equal(r.status, 200);
  ev = await take('mouseup', 1);
  t.same(ev.filter((e) => e.type === 'mousedown' || e.type === 'mouseup').map((e) => `${e.type}:${mods(e)}:${e.sx},${e.sy}`), [
    `mousedown:alt:600,700`,
    `mouseup:alt:700,750`,
  ]);

  r = await a.client.request('POST', '/mouse/scroll', { at: { x: 800, y: 700 }, direction: 'down', amount: 2, modifiers: ['shift'] });
  t.equal(r.status, 200);
  ev = await take('wheel', 1);
  const wheels = ev.filter((e) => e.type === 'wheel');
  t.ok(wheels.length >= 1 && wheels.every((e) => mods(e) === 'shift'), `wheel events with shift (${wheels.map(mods).join(' ')})`);

  r = await a.client.request('POST', '/mouse/click', { at: { x: 900, y: 700 } });
  ev = await take('click', 1);
  // A late wheel event of the scroll above (Chromium may deliver its second one after the first was taken) is
  // the scroll's, with its shift: only the click's own events say whether anything is still held.
  t.same(ev.filter((e) => e.type !== 'wheel').map((e) => `${e.type}:${mods(e)}`), ['mousedown:', 'mouseup:', 'click:'], 'nothing left held');

  for (const [body, field] of [
    [{ modifiers: ['hyper'] }, 'modifiers.0'],
    [{ modifiers: ['shift', 'shift'] }, 'modifiers'],
  ] as const) {
    const bad = await a.client.request('POST', '/mouse/click', body);
    t.equal(bad.status, 400);
    t.equal(bad.json().error.details[0].field, field);
  }
  t.equal(await page.eval('window.loadId'), loadId, 'no reload');
});

/** Bounding box of the pure red pixels of a decoded frame (a lossless PNG). */
function redBox(f: RawFrame): { x0: number; y0: number; x1: number; y1: number } | null {
  let box: { x0: number; y0: number; x1: number; y1: number } | null = null;
  for (let y = 0; y < f.height; y++) {
    for (let x = 0; x < f.width; x++) {
      const i = (y * f.width + x) * 3;
      if (f.rgb[i] === 255 && f.rgb[i + 1] === 0 && f.rgb[i + 2] === 0) {
        if (!box) box = { x0: x, y0: y, x1: x, y1: y };
        box.x0 = Math.min(box.x0, x);
        box.y0 = Math.min(box.y0, y);
        box.x1 = Math.max(box.x1, x);
        box.y1 = Math.max(box.y1, y);
      }
    }
  }
  return box;
}

t.test('extension: screenshots scaled and zoomed server-side map back to the display', async (t) => {
  const shot = async (q: string) => {
    const r = await a.client.request('GET', `/screenshot?format=png${q}`);
    t.equal(r.status, 200, q);
    const j = r.json();
    return { json: j, frame: await decodeToRgb(Buffer.from(j.image, 'base64')) };
  };
  const full = await shot('');
  t.notOk('view' in full.json, 'the plain screenshot has no view (the spec answer)');
  const box = redBox(full.frame)!;
  // The page's 120x80 box, wherever the window put it.
  t.same({ w: box.x1 - box.x0 + 1, h: box.y1 - box.y0 + 1 }, { w: 120, h: 80 });

  const half = await shot('&width=1280');
  t.same(half.json.view, { region: { x: 0, y: 0, width: 2560, height: 1600 }, width: 1280, height: 800, scale: { x: 0.5, y: 0.5 } });
  t.same({ w: half.frame.width, h: half.frame.height }, { w: 1280, h: 800 });
  const hb = redBox(half.frame)!;
  t.ok(Math.abs(hb.x0 - box.x0 / 2) <= 1 && Math.abs(hb.y0 - box.y0 / 2) <= 1, 'the box is where the scale says');

  const long = await shot('&max_side=1000');
  t.same({ w: long.frame.width, h: long.frame.height }, { w: 1000, h: 625 });

  // Zoom: a 60x40 region around the box's top-left corner, shown 4x.
  const rx = box.x0 - 30;
  const ry = box.y0 - 20;
  const zoom = await shot(`&region=${rx},${ry},60,40&width=240`);
  t.same(zoom.json.view, { region: { x: rx, y: ry, width: 60, height: 40 }, width: 240, height: 160, scale: { x: 4, y: 4 } });
  const zb = redBox(zoom.frame)!;
  // The corner lands at image (30*4, 20*4); mapping back gives the display point of the corner.
  t.ok(Math.abs(zb.x0 - 120) <= 2 && Math.abs(zb.y0 - 80) <= 2, `corner at ${zb.x0},${zb.y0} in the zoomed image`);
  // (Resampling softens the edge by a pixel or two of the zoomed image: within one display pixel.)
  t.ok(Math.abs(zoom.json.view.region.x + zb.x0 / zoom.json.view.scale.x - box.x0) <= 1, 'maps back to the box corner (x)');
  t.ok(Math.abs(zoom.json.view.region.y + zb.y0 / zoom.json.view.scale.y - box.y0) <= 1, 'maps back to the box corner (y)');

  for (const [q, field] of [
    ['&region=2500,0,100,10', 'region'],
    ['&region=1,2,3', 'region'],
    ['&max_side=500&width=100', 'max_side'],
    ['&width=0', 'width'],
  ] as const) {
    const r = await a.client.request('GET', `/screenshot?format=png${q}`);
    t.equal(r.status, 400, q);
    t.equal(r.json().error.details[0].field, field, q);
  }
});

t.test('extension: settle-aware input', async (t) => {
  // Blur the text field first (its caret blinks) and let the page go quiet.
  await a.client.request('POST', '/mouse/click', { at: { x: 100, y: 1300 }, settle: { quiet_ms: 600 } });

  const noop = await a.client.request('POST', '/mouse/click', { settle: { quiet_ms: 200 } });
  t.equal(noop.status, 200);
  t.match(noop.json().settle, { settled: true, changed: false, changed_box: null }, 'a no-op click settles, nothing changed');
  t.notOk('screenshot' in noop.json().settle);

  // The kiosk window does not cover the whole display: page coordinates are offset by its position.
  const win = await page.eval<{ x: number; y: number }>('({ x: window.screenX, y: window.screenY })');
  // Move first (the pointer is drawn into the framebuffer), then click where it is. The quiet window (1 s) is
  // longer than the menu's stages (100 ms, then 150 ms) with room for a loaded host's late paint: with 300 ms, a
  // paint later than that on a busy CI host read as 'nothing changed' (seen once at load 16).
  await a.client.request('POST', '/mouse/move', { x: win.x + 1000, y: win.y + 420, settle: { quiet_ms: 200 } });
  const open = await a.client.request('POST', '/mouse/click', { settle: { quiet_ms: 1000, timeout_ms: 8000, screenshot: { format: 'png', max_side: 1280 } } });
  t.equal(open.status, 200);
  const st = open.json().settle;
  t.match(st, { settled: true, changed: true });
  // The menu is 200x150 at page (950, 450).
  t.same(st.changed_box, { x: win.x + 950, y: win.y + 450, width: 200, height: 150 }, 'the changed box is the menu');
  t.same(st.screenshot.view, { region: { x: 0, y: 0, width: 2560, height: 1600 }, width: 1280, height: 800, scale: { x: 0.5, y: 0.5 } });
  const f = await decodeToRgb(Buffer.from(st.screenshot.image, 'base64'));
  const mx = Math.round((st.changed_box.x + 100) / 2);
  const my = Math.round((st.changed_box.y + 75) / 2);
  const i = (my * f.width + mx) * 3;
  t.same([f.rgb[i], f.rgb[i + 1], f.rgb[i + 2]], [0, 255, 0], 'the after-screenshot shows the menu in its final state, not a stage of it');

  await page.eval('window.spin()');
  // The spinner changes every 30 ms; a quiet window of 1 s still sees it change on a host loaded enough that
  // Chromium paints a few frames a second (200 ms read as quiet there).
  const busy = await a.client.request('POST', '/mouse/move', { x: win.x + 20, y: win.y + 1500, settle: { quiet_ms: 1000, timeout_ms: 2000 } });
  t.equal(busy.status, 200);
  t.match(busy.json().settle, { settled: false, changed: true }, 'a screen that keeps changing does not settle');
  await page.eval('clearInterval(window.spinning)');

  const key = await a.client.request('POST', '/keyboard/key', { key: 'Shift_L', settle: { quiet_ms: 50 } });
  t.match(key.json().settle, { settled: true }, 'every input route takes settle');
  const bad = await a.client.request('POST', '/mouse/move', { x: 1, y: 1, settle: { quiet_ms: 5 } });
  t.equal(bad.status, 400);
  t.equal(bad.json().error.details[0].field, 'settle.quiet_ms');
  const badView = await a.client.request('POST', '/mouse/move', { x: 1, y: 1, settle: { screenshot: { width: 10, max_side: 100 } } });
  t.equal(badView.status, 400, 'a screenshot view that cannot be made is refused before the input');
});

t.test('drags after a double click elsewhere, at 1920x1200 while display reads from 1280x800 land late: the page sees press, moves and release where they were sent', async (t) => {
  // Issue 21 item 2: Anthropic's left_mouse_down → mouse_move → left_mouse_up and left_click_drag replayed
  // through the plain routes right after a double click on a button. Reported: press and release at the
  // earlier pointer position with no move between. Cause: a GET /display whose read saw the display before
  // a resize to 1920x1200 answered after it and put the old size back, so the moves were refused (400)
  // while down/up went through (docs/agent-desktop.md, "Overlapping mode reads"). Here such late reads
  // land right before each move, every time: all are taken at 1280x800 and held (`hold`), the display is
  // resized to 1920x1200, and each is let go just before a move.
  const call = async (p: string, body: unknown) => {
    const r = await a.client.request('POST', p, body);
    t.equal(r.status, 200, `${p} ${JSON.stringify(body)}${r.status === 200 ? '' : `: ${r.body}`}`);
  };
  await call('/display/resize', { width: 1280, height: 800 });
  const late: Array<() => Promise<void>> = [];
  for (let i = 0; i < 1 + 3 * 3; i++) {
    const h = reads.hold();
    const get = a.client.request('GET', '/display');
    t.match(await h.held, { width: 1280, height: 800 }, 'a GET /display read saw 1280x800');
    late.push(async () => {
      h.release();
      t.equal((await get).status, 200, 'the late GET /display answered');
    });
  }
  const land = () => late.shift()!();
  await call('/display/resize', { width: 1920, height: 1200 });
  await land();
  const far = await a.client.request('POST', '/mouse/move', { x: 1900, y: 1150 });
  t.equal(far.status, 200, `mouse/move to (1900,1150) after a late read: ${far.body}`);

  // Chromium (kiosk, no window manager) narrows its window to a smaller screen and keeps it so; it keeps its
  // height. Every point below is left of x 1200 and at y 850 or more (past 800), so a late 1280x800 would refuse it.
  const win = await page.eval<{ x: number; y: number }>('({ x: window.screenX, y: window.screenY })');
  await waitFor(() => page.eval<boolean>('screenX + innerWidth >= 1210 && screenY + innerHeight >= 1180'), 10_000, 20).catch(async () => {
    throw new Error(`the page window does not cover the test points: ${await page.eval('JSON.stringify([screenX, screenY, innerWidth, innerHeight])')}`);
  });
  const at = (x: number, y: number) => ({ x: win.x + x, y: win.y + y });
  const rec = (p: { x: number; y: number }, what: string, buttons: number) => `${what} ${p.x},${p.y} ${buttons}`;
  /** The page's records, consecutive repeats folded (a move to where the pointer already is may be reported again). */
  const records = async () => (await page.eval<string[]>('moves.splice(0)')).filter((r, i, all) => r !== all[i - 1]);
  /** A double click on the button (Chromium counts it), then records start. */
  const doubleClickElsewhere = async () => {
    await page.eval('ev.splice(0); window.moves = null');
    await call('/mouse/click', { at: at(1190, 220), count: 2 });
    await take('dblclick', 1);
    await page.eval('window.moves = []');
  };
  for (let round = 0; round < 3; round++) {
    // A double click on the button, then at once the press-move-release on the pad.
    await doubleClickElsewhere();
    const A = at(200 + round * 100, 850);
    const B = at(600 + round * 100, 1100);
    await land();
    await call('/mouse/move', A);
    await call('/mouse/click', { button: 'left', down: true });
    await land();
    await call('/mouse/move', B);
    await call('/mouse/click', { button: 'left', up: true });
    await waitFor(() => page.eval<boolean>('moves.some((m) => m.startsWith("mouseup"))'), 10_000, 5);
    t.same(await records(), [rec(A, 'mousemove', 0), rec(A, 'mousedown', 1), rec(B, 'mousemove', 1), rec(B, 'mouseup', 0)], `round ${round}: down, move, up`);

    // left_click_drag from the current pointer: move to A2, then drag to B2 (10 steps).
    await doubleClickElsewhere();
    const A2 = at(250 + round * 100, 900);
    const B2 = at(650 + round * 100, 1150);
    await land();
    await call('/mouse/move', A2);
    await call('/mouse/drag', { to: B2 });
    await waitFor(() => page.eval<boolean>('moves.some((m) => m.startsWith("mouseup"))'), 10_000, 5);
    const drag = await records();
    const down = drag.indexOf(rec(A2, 'mousedown', 1));
    t.same(drag.slice(0, down + 1), [rec(A2, 'mousemove', 0), rec(A2, 'mousedown', 1)], `round ${round}: the drag presses at A2 (${drag.join('; ')})`);
    const between = drag.slice(down + 1, -1);
    t.ok(between.length >= 1 && between.every((m) => m.startsWith('mousemove ') && m.endsWith(' 1')), `round ${round}: moves with the button held in between (${between.join('; ')})`);
    t.equal(between[between.length - 1], rec(B2, 'mousemove', 1), `round ${round}: the last move reaches B2`);
    t.equal(drag[drag.length - 1], rec(B2, 'mouseup', 0), `round ${round}: released at B2`);
  }
  t.equal(late.length, 0, 'every late read landed');
  await page.eval('window.moves = null');
  t.equal(await page.eval('window.loadId'), loadId, 'no reload');
});
