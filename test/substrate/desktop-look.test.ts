/**
 * What a person taking over a real container machine sees (docs/guest-image.md): a wallpaper and a panel
 * (not a black screen), a clock, a terminal launcher that opens a terminal, and Chromium under the image's
 * managed policies (no unsupported-flag bar for --no-sandbox, no sign-in or first-run prompts).
 */
import t from 'tap';
import { decodeToRgb } from '../../agent/src/desktop/screen.js';
import { containerMachineRig } from '../helpers/container-machine.js';
import { displayUp, until } from '../helpers/machines-rig.js';

t.test('the desktop a person sees', async (t) => {
  const m = await containerMachineRig(t);
  const id = await m.machine('look');
  const key = m.tenant.key;
  const display = await displayUp(m.rig, key, id);
  t.same([display.width, display.height], [1280, 800]);
  await until('the panel', 60, async () => ((await m.exec(id, ['pgrep', '-x', 'tint2'])).exit_code === 0 ? true : null));
  const shot = async () => {
    const r = await m.rig.call('GET', `/v1/machines/${id}/screenshot?format=png`, { key });
    if (r.status !== 200) throw new Error(`screenshot ${r.status}`);
    return decodeToRgb(Buffer.from(r.json.image, 'base64'));
  };
  const px = (f: { rgb: Buffer; width: number }, x: number, y: number) => {
    const o = (y * f.width + x) * 3;
    return [f.rgb[o]!, f.rgb[o + 1]!, f.rgb[o + 2]!] as const;
  };
  const session = (await m.rig.call('POST', '/v1/sessions', { key, body: { machine_id: id, type: 'agent' } })).json.id;
  const lease = (await m.rig.call('POST', `/v1/machines/${id}/input-lease`, { key, body: { session_id: session } })).json;
  const headers = { 'x-session-id': session, 'x-lease-fence': String(lease.fence) };

  await t.test('wallpaper and panel with a clock, not a black screen', async (t) => {
    // The panel draws its clock a moment after it starts.
    const f = await until('the panel drawn', 40, async () => {
      const s = await shot();
      let bright = 0;
      for (let y = 800 - 32; y < 800; y++) for (let x = 1280 - 120; x < 1280; x++) if (Math.min(...px(s, x, y)) > 0xb0) bright++;
      return bright > 20 ? s : null;
    });
    const colours = new Set<number>();
    for (let y = 0; y < 800; y += 8) for (let x = 0; x < 1280; x += 8) colours.add(px(f, x, y).reduce((a, c) => a * 256 + c, 0));
    t.ok(colours.size > 50, `many colours on screen (${colours.size}), not a uniform black`);
    const wall = px(f, 640, 300);
    t.ok(wall[2] > 0x20 && wall[2] > wall[0], `wallpaper is bluish (${wall})`);
    const panel = px(f, 640, 800 - 16);
    t.ok(Math.max(...panel) < 0x60, `the panel strip is dark (${panel})`);
    t.notSame(panel, px(f, 640, 800 - 40), 'the panel differs from the wallpaper above it');
  });

  await t.test('the terminal launcher opens a terminal', async (t) => {
    const before = await m.exec(id, ['xdotool', 'search', '--class', 'xterm']);
    t.equal(before.stdout, '', 'no terminal yet');
    const c = await m.rig.call('POST', `/v1/machines/${id}/mouse/click`, { key, headers, body: { at: { x: 20, y: 800 - 16 } } });
    t.equal(c.status, 200);
    const wins = await until('an xterm window', 40, async () => {
      const r = await m.exec(id, ['xdotool', 'search', '--onlyvisible', '--class', 'xterm']);
      return r.stdout.trim() ? r.stdout.trim() : null;
    });
    t.ok(wins.length > 0, 'an xterm window is mapped');
    const ps = await m.exec(id, ['pgrep', '-u', 'agent', '-x', 'xterm']);
    t.equal(ps.exit_code, 0, 'running as the agent user');
    await m.exec(id, ['pkill', '-x', 'xterm']);
  });

  await t.test('Chromium under managed policies: no infobar, no prompts', async (t) => {
    const policy = await m.exec(id, ['node', '-e', "process.stdout.write(JSON.stringify(JSON.parse(require('fs').readFileSync('/etc/chromium/policies/managed/computer.json','utf8'))))"]);
    t.equal(policy.exit_code, 0, 'the policy file parses');
    t.match(JSON.parse(policy.stdout), { CommandLineFlagSecurityWarningsEnabled: false, BrowserSignin: 0, SyncDisabled: true, PromotionalTabsEnabled: false, DefaultBrowserSettingEnabled: false });
    // A page that is magenta from its first row: the rows between the window's top and the first magenta
    // row are Chromium's own (tab strip + toolbar); an infobar would add ~40 px to them.
    await m.exec(id, ['sh', '-c', 'printf "<html><body style=\\"margin:0;background:#ff00ff;height:100vh\\"></body></html>" > /tmp/magenta.html']);
    const o = await m.rig.call('POST', `/v1/machines/${id}/browser/open`, { key, headers, body: { url: 'file:///tmp/magenta.html' } });
    t.equal(o.status, 200);
    const geo = await until('the browser window', 60, async () => {
      const r = await m.exec(id, ['sh', '-c', 'xdotool search --onlyvisible --class chromium | head -n1 | xargs -r xdotool getwindowgeometry --shell']);
      const y = /Y=(\d+)/.exec(r.stdout)?.[1];
      const x = /X=(\d+)/.exec(r.stdout)?.[1];
      const w = /WIDTH=(\d+)/.exec(r.stdout)?.[1];
      return y !== undefined && x !== undefined && w !== undefined ? { x: Number(x), y: Number(y), width: Number(w) } : null;
    });
    const pageTop = await until('the page drawn', 60, async () => {
      const f = await shot();
      const cx = geo.x + Math.floor(geo.width / 2);
      for (let y = geo.y; y < 800; y++) {
        const [r, g, b] = px(f, cx, y);
        if (r > 0xf0 && g < 0x10 && b > 0xf0) return y;
      }
      return null;
    });
    const chrome = pageTop - geo.y;
    t.comment(`browser window at y=${geo.y}, page from y=${pageTop}: ${chrome} px of browser chrome`);
    t.ok(chrome > 20 && chrome < 100, `only tab strip and toolbar above the page (${chrome} px), no infobar`);
    const windows = await m.exec(id, ['sh', '-c', 'xdotool search --onlyvisible --class chromium | wc -l']);
    t.equal(windows.stdout.trim(), '1', 'one browser window: no first-run or sign-in window');
  });
});
