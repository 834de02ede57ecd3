/**
 * POST /v1/machines/{id}/tools/anthropic and /tools/openai through the real control plane to the real
 * agent on Xvfb, driving a real Chromium page: coordinates scaled as Anthropic's reference
 * implementation does (2560x1600 display declared as 1280x800: factor 0.5), clicks, typing, keys,
 * scroll, drag, zoom; OpenAI computer_call actions answered with computer_call_output.
 */
import t from 'tap';
import { decodeToRgb } from '../../agent/src/desktop/screen.js';
import { openChromiumPage } from '../helpers/chromium-page.js';
import { startGatewayRig } from '../helpers/gateway-rig.js';

const HTML = `<!doctype html><html><head><meta charset="utf-8"></head>
<body style="margin:0;height:100vh;overflow:hidden">
<textarea id="ta" style="position:absolute;left:0;top:0;width:600px;height:200px" spellcheck="false"></textarea>
<div style="position:absolute;left:0;top:300px;right:0;bottom:0;background:#ddd;user-select:none"></div>
<script>
window.ev = [];
for (const k of ['mousedown', 'mouseup', 'click', 'wheel']) addEventListener(k, (e) => ev.push({ type: k, detail: e.detail, sx: e.screenX, sy: e.screenY, shift: e.shiftKey, dy: e.deltaY ?? 0 }), { capture: true, passive: true });
window.ready = true;
</script></body></html>`;

t.test('computer tool endpoints', async (t) => {
  const g = await startGatewayRig(t);
  await g.desktopUp();
  const page = await openChromiumPage(t, g.xvfb.display, HTML);
  const win = await page.eval<{ x: number; y: number }>('({ x: window.screenX, y: window.screenY })');
  const base = `/v1/machines/${g.machineId}`;
  const session = (await g.api('POST', '/v1/sessions', { machine_id: g.machineId, type: 'agent' })).json.id;
  const lease = (await g.api('POST', `${base}/input-lease`, { session_id: session })).json;
  const headers = { 'x-session-id': session, 'x-lease-fence': String(lease.fence) };
  const tool = async (input: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
    const r = await g.api('POST', `${base}/tools/anthropic`, { input, ...extra }, headers);
    if (r.status !== 200) throw new Error(`tool ${JSON.stringify(input)}: ${r.status} ${r.text}`);
    return r.json;
  };
  const events = async (type: string, n: number) => {
    for (let i = 0; i < 400; i++) {
      if (await page.eval<boolean>(`ev.filter((e) => e.type === '${type}').length >= ${n}`)) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    return page.eval<Array<{ type: string; detail: number; sx: number; sy: number; shift: boolean; dy: number }>>('ev.splice(0)');
  };
  // A point of the page in the declared (half-size) space; it maps back to exactly twice itself.
  const api = (pageX: number, pageY: number): [number, number] => [Math.round((win.x + pageX) / 2), Math.round((win.y + pageY) / 2)];

  await t.test('screenshot at the declared size', async (t) => {
    const r = await tool({ action: 'screenshot' });
    t.match(r, { is_error: false, display_width_px: 1280, display_height_px: 800 }, 'the reference declares 1280x800 for 2560x1600');
    t.equal(r.content.length, 1);
    t.match(r.content[0], { type: 'image', source: { type: 'base64', media_type: 'image/png' } });
    const f = await decodeToRgb(Buffer.from(r.content[0].source.data, 'base64'));
    t.same([f.width, f.height], [1280, 800]);
  });

  await t.test('clicks land where the scaled coordinate says, counted by Chromium', async (t) => {
    await page.eval('ev.splice(0)');
    const [x, y] = api(400, 500);
    const r = await tool({ action: 'left_click', coordinate: [x, y] });
    t.equal(r.content[0].type, 'image', 'a screenshot after the action');
    let ev = await events('click', 1);
    t.same(ev.filter((e) => e.type === 'mousedown').map((e) => [e.sx, e.sy]), [[x * 2, y * 2]], 'scaled up by exactly 1/0.5');
    for (const [action, n] of [['double_click', 2], ['triple_click', 3]] as const) {
      const [cx, cy] = api(200 + n * 100, 600);
      await tool({ action, coordinate: [cx, cy] });
      ev = await events('click', n);
      t.same(ev.filter((e) => e.type === 'mousedown').map((e) => e.detail), n === 2 ? [1, 2] : [1, 2, 3], action);
    }
    await tool({ action: 'left_click', coordinate: api(700, 700), key: 'shift' });
    ev = await events('click', 1);
    t.ok(ev.filter((e) => e.type === 'mousedown').every((e) => e.shift), 'key holds a modifier during the click');
    const pos = await tool({ action: 'cursor_position' });
    const [px, py] = api(700, 700);
    t.same(pos.content, [{ type: 'text', text: `X=${px},Y=${py}` }], 'cursor_position scaled back down');
    // The spec has no read-only pointer query: the tool reads the pointer inside the service, /v1 does not serve it.
    const direct = await g.api('GET', `${base}/mouse/position`);
    t.equal(direct.status, 404, 'GET mouse/position is not a /v1 route');
    t.equal(direct.json.error.code, 'not_found');
    t.notOk('pointer' in direct.json, 'and answers no pointer');
  });

  await t.test('type and key into a text field', async (t) => {
    await tool({ action: 'left_click', coordinate: api(100, 100) });
    await tool({ action: 'type', text: 'héllo 日本 ✓' });
    t.equal(await page.eval("document.getElementById('ta').value"), 'héllo 日本 ✓');
    await tool({ action: 'key', text: 'ctrl+a BackSpace' });
    t.equal(await page.eval("document.getElementById('ta').value"), '', 'a chord then a key');
    const bad = await tool({ action: 'key', text: 'NoSuchKey' });
    t.equal(bad.is_error, true, 'an unknown key is an error result for the model');
    t.match(bad.content[0].text, /key/);
  });

  await t.test('scroll with a modifier, drag, mouse down/up', async (t) => {
    await page.eval('ev.splice(0)');
    await tool({ action: 'scroll', coordinate: api(500, 800), scroll_direction: 'down', scroll_amount: 2, text: 'shift' });
    const ev = await events('wheel', 1);
    t.ok(ev.some((e) => e.type === 'wheel' && e.shift), 'wheel with shift');
    await page.eval('ev.splice(0)');
    const from = api(300, 900);
    const to = api(500, 1000);
    await tool({ action: 'left_click_drag', start_coordinate: from, coordinate: to });
    const d = await events('mouseup', 1);
    t.same(d.filter((e) => e.type === 'mousedown' || e.type === 'mouseup').map((e) => [e.type, e.sx, e.sy]), [
      ['mousedown', from[0] * 2, from[1] * 2],
      ['mouseup', to[0] * 2, to[1] * 2],
    ]);
    await tool({ action: 'left_mouse_down' });
    await tool({ action: 'left_mouse_up' });
    t.same((await events('mouseup', 1)).map((e) => e.type), ['mousedown', 'mouseup', 'click']);
  });

  await t.test('zoom (computer_20251124) shows a region at the declared size', async (t) => {
    const refused = await tool({ action: 'zoom', region: [0, 0, 320, 200] });
    t.equal(refused.is_error, true, 'not with computer_20250124');
    const r = await tool({ action: 'zoom', region: [0, 0, 320, 200] }, { tool: 'computer_20251124', enable_zoom: true });
    t.equal(r.is_error, false);
    const f = await decodeToRgb(Buffer.from(r.content[0].source.data, 'base64'));
    t.same([f.width, f.height], [1280, 800], 'a 640x400 display region magnified to 1280x800');
  });

  await t.test('errors', async (t) => {
    const out = await tool({ action: 'left_click', coordinate: [1281, 10] });
    t.match(out, { is_error: true, content: [{ type: 'text', text: /out of bounds/ }] });
    const w = await tool({ action: 'wait', duration: 0.1 });
    t.equal(w.content[0].type, 'image');
    const bad = await g.api('POST', `${base}/tools/anthropic`, { input: { action: 'fly' } }, headers);
    t.equal(bad.status, 400);
    t.equal(bad.json.error.code, 'invalid_request');
    const half = await g.api('POST', `${base}/tools/anthropic`, { display_width_px: 1024, input: { action: 'screenshot' } }, headers);
    t.equal(half.status, 400);
    const noLease = await g.api('POST', `${base}/tools/anthropic`, { input: { action: 'screenshot' } });
    t.not(noLease.status, 200, 'the input lease is required');
    const declared = await tool({ action: 'screenshot' }, { display_width_px: 1024, display_height_px: 640 });
    const f = await decodeToRgb(Buffer.from(declared.content[0].source.data, 'base64'));
    t.same([f.width, f.height, declared.display_width_px], [1024, 640, 1024], 'a declared size is honoured');
  });

  await t.test('OpenAI computer_call actions', async (t) => {
    const oa = async (action: Record<string, unknown>, extra: Record<string, unknown> = { display_width: 1280, display_height: 800 }) => {
      const r = await g.api('POST', `${base}/tools/openai`, { call_id: 'call_1', action, ...extra }, headers);
      if (r.status !== 200) throw new Error(`openai ${JSON.stringify(action)}: ${r.status} ${r.text}`);
      return r.json;
    };
    const shot = await oa({ type: 'screenshot' });
    t.match(shot, { type: 'computer_call_output', call_id: 'call_1', output: { type: 'computer_screenshot' } });
    const png = (j: { output: { image_url: string } }) => decodeToRgb(Buffer.from(j.output.image_url.replace(/^data:image\/png;base64,/, ''), 'base64'));
    t.same([(await png(shot)).width, (await png(shot)).height], [1280, 800], 'at the declared size');
    const own = await oa({ type: 'screenshot' }, {});
    t.same([(await png(own)).width], [2560], "without a declared size: the machine's own");

    await page.eval('ev.splice(0)');
    const [x, y] = api(400, 500);
    await oa({ type: 'click', x, y, button: 'left' });
    t.same((await events('click', 1)).filter((e) => e.type === 'mousedown').map((e) => [e.sx, e.sy]), [[x * 2, y * 2]], 'scaled by display size');
    await oa({ type: 'double_click', x: x + 50, y });
    t.same((await events('click', 2)).filter((e) => e.type === 'mousedown').map((e) => e.detail), [1, 2]);
    const path = [api(300, 900), api(400, 950), api(500, 1000)].map(([px, py]) => ({ x: px, y: py }));
    await oa({ type: 'drag', path });
    t.same((await events('mouseup', 1)).filter((e) => e.type === 'mousedown' || e.type === 'mouseup').map((e) => [e.type, e.sx, e.sy]), [
      ['mousedown', path[0]!.x * 2, path[0]!.y * 2],
      ['mouseup', path[2]!.x * 2, path[2]!.y * 2],
    ]);
    await oa({ type: 'scroll', x, y, scroll_x: 0, scroll_y: 300 });
    const wheel = (await events('wheel', 1)).filter((e) => e.type === 'wheel');
    t.ok(wheel.length >= 1 && wheel.every((e) => e.dy > 0), 'scroll_y > 0 scrolls down');

    const [tx, ty] = api(100, 100);
    await oa({ type: 'click', x: tx, y: ty, button: 'left' });
    await oa({ type: 'type', text: 'ÖpenAI ✓' });
    t.equal(await page.eval("document.getElementById('ta').value"), 'ÖpenAI ✓');
    await oa({ type: 'keypress', keys: ['CTRL', 'A'] });
    await oa({ type: 'keypress', keys: ['BACKSPACE'] });
    t.equal(await page.eval("document.getElementById('ta').value"), '', 'key names mapped (CTRL, BACKSPACE)');
    t.match(await oa({ type: 'wait' }), { output: { type: 'computer_screenshot' } });

    const off = await g.api('POST', `${base}/tools/openai`, { action: { type: 'click', x: 1280, y: 5 }, display_width: 1280, display_height: 800 }, headers);
    t.equal(off.status, 400);
    t.equal(off.json.error.details[0].field, 'action.x');
    const bad = await g.api('POST', `${base}/tools/openai`, { action: { type: 'teleport' } }, headers);
    t.equal(bad.status, 400);
    const noLease = await g.api('POST', `${base}/tools/openai`, { action: { type: 'screenshot' } });
    t.not(noLease.status, 200, 'the input lease is required');
  });
});
