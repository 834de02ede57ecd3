import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { lookupUser } from '../../agent/src/users.js';
import { PROFILE_DIR_NAME } from '../../agent/src/desktop/browser.js';
import { startDesktopAgent, waitFor, xrun } from '../helpers/desktop-agent.js';

const SECRET_TEXT = 'clip-Ünïcødé ✓ 日本語 secret-4711';
const PRIMARY_TEXT = 'primary-only ßtraße';

t.test('clipboard and browser over the real channel', async (t) => {
  const a = await startDesktopAgent(t);
  const c = a.client;

  t.test('clipboard round trip for both selections', async (t) => {
    const empty = await c.request('GET', '/clipboard?selection=primary');
    t.equal(empty.status, 200);
    t.same(empty.json(), { selection: 'primary', text: null }, 'nothing owns the selection yet');
    const set = await c.request('PUT', '/clipboard', { text: SECRET_TEXT });
    t.equal(set.status, 200);
    t.same(set.json(), { selection: 'clipboard', text: SECRET_TEXT });
    t.same((await c.request('GET', '/clipboard')).json(), { selection: 'clipboard', text: SECRET_TEXT });
    t.same((await c.request('GET', '/clipboard?selection=primary')).json().text, null, 'primary untouched');
    t.equal((await c.request('PUT', '/clipboard', { text: PRIMARY_TEXT, selection: 'primary' })).status, 200);
    t.same((await c.request('GET', '/clipboard?selection=primary')).json(), { selection: 'primary', text: PRIMARY_TEXT });
    t.same((await c.request('GET', '/clipboard?selection=clipboard')).json().text, SECRET_TEXT, 'selections are independent');
    // What a real X client sees.
    const seen = await xrun(a.xvfb.display, 'xclip', ['-o', '-selection', 'clipboard']);
    t.equal(seen.stdout, SECRET_TEXT);
    const multi = 'line one\nline two\ttabbed\n';
    t.equal((await c.request('PUT', '/clipboard', { text: multi })).status, 200);
    t.equal((await c.request('GET', '/clipboard')).json().text, multi, 'newlines kept');
    t.equal((await c.request('PUT', '/clipboard', { text: '' })).status, 200);
    t.equal((await c.request('GET', '/clipboard')).json().text, '', 'empty text is a text');
    for (let i = 0; i < 5; i++) {
      const v = `quick-${i}`;
      t.equal((await c.request('PUT', '/clipboard', { text: v })).status, 200);
      t.equal((await c.request('GET', '/clipboard')).json().text, v, 'set is visible at once');
    }
    t.equal((await c.request('PUT', '/clipboard', { text: SECRET_TEXT })).status, 200);
  });

  t.test('clipboard refusals', async (t) => {
    const bad = await c.request('GET', '/clipboard?selection=secondary');
    t.equal(bad.status, 400);
    t.equal(bad.json().error.details[0].field, 'selection');
    const noText = await c.request('PUT', '/clipboard', { selection: 'primary' });
    t.equal(noText.status, 400);
    t.equal(noText.json().error.details[0].field, 'text');
    const wrong = await c.request('PUT', '/clipboard', { text: 5 });
    t.equal(wrong.status, 400);
  });

  t.test('browser open launches Chromium once, then hands it URLs', async (t) => {
    const u = lookupUser('agent');
    t.ok(u, 'agent user exists');
    const profile = path.join(u!.home, PROFILE_DIR_NAME);
    // Chromium's zygote and renderers leave the launcher's process group, so every process of
    // this profile is found by its command line and killed by pid.
    const profilePids = () =>
      fs
        .readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .filter((d) => {
          try {
            return fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(`--user-data-dir=${profile}`) && !/\) [ZX] /.test(fs.readFileSync(`/proc/${d}/stat`, 'utf8'));
          } catch {
            return false;
          }
        })
        .map(Number);
    const killBrowser = async () => {
      for (const pid of profilePids()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await waitFor(() => profilePids().length === 0 && a.desktop.browserPid() === null, 10_000).catch(() => {});
    };
    await killBrowser();
    t.teardown(async () => {
      await killBrowser();
      fs.rmSync(profile, { recursive: true, force: true });
      // Chromium puts the profile's disk cache under ~/.cache/<profile dir name>.
      fs.rmSync(path.join(u!.home, '.cache', path.basename(PROFILE_DIR_NAME)), { recursive: true, force: true });
    });
    const url1 = 'data:text/html,<title>computer-first-page</title><h1>hello</h1>';
    const first = await c.request('POST', '/browser/open', { url: url1 });
    t.equal(first.status, 200);
    t.same(first.json(), { url: url1, launched: true });
    const url2 = 'data:text/html,<title>computer-second-page</title>';
    const second = await c.request('POST', '/browser/open', { url: url2, new_window: true });
    t.equal(second.status, 200);
    t.same(second.json(), { url: url2, launched: false });
    const pid = await waitFor(() => a.desktop.browserPid(), 60_000, 200);
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    t.match(status, new RegExp(`\\nUid:\\s+${u!.uid}\\s`), 'runs as the agent user');
    t.equal(fs.statSync(profile).uid, u!.uid, 'profile owned by the agent user');
    const win = await waitFor(
      async () => {
        const r = await xrun(a.xvfb.display, 'xdotool', ['search', '--name', 'computer-second-page']);
        return r.code === 0 ? r.stdout : null;
      },
      60_000,
      250,
    );
    t.ok(win.trim().length > 0, 'the second URL reached the running browser');
    const again = await c.request('POST', '/browser/open', { url: 'about:blank' });
    t.same(again.json(), { url: 'about:blank', launched: false });
    // The spec says a URI: schemes beyond the common five are what a browser opens too.
    for (const url of ['chrome://version/', 'view-source:about:blank']) {
      const other = await c.request('POST', '/browser/open', { url });
      t.equal(other.status, 200, url);
      t.same(other.json(), { url, launched: false });
    }
  });

  t.test('browser refusals', async (t) => {
    for (const body of [{ url: 'javascript:alert(1)' }, { url: 'not a url' }, { url: 'https://x/' + 'a'.repeat(4100) }, { url: 'https://x/', new_window: 'yes' }, {}]) {
      const r = await c.request('POST', '/browser/open', body);
      t.equal(r.status, 400, JSON.stringify(body).slice(0, 60));
      t.equal(r.json().error.code, 'invalid_request');
    }
    // Script schemes, however spelled, are refused with a message that says why; so is anything that is not a
    // URI as written (a browser would strip the blank or the tab and see javascript:).
    const script = (s: string) => `${s}: URLs run script in the open page instead of opening one; they are refused`;
    const notUri = 'must be an absolute URI (a scheme such as https: first; no spaces or control characters)';
    for (const [url, message] of [
      ['javascript:alert(1)', script('javascript')],
      ['JavaScript:alert(1)', script('javascript')],
      ['vbscript:msgbox(1)', script('vbscript')],
      ['livescript:x', script('livescript')],
      [' javascript:alert(1)', notUri],
      ['java\tscript:alert(1)', notUri],
      ['javascript\n:alert(1)', notUri],
      ['data:text/html,<p>a b</p>', notUri],
    ]) {
      const r = await c.request('POST', '/browser/open', { url });
      t.equal(r.status, 400, JSON.stringify(url));
      t.same(r.json().error.details, [{ field: 'url', message }], JSON.stringify(url));
    }
  });

  t.test('logs never carry clipboard text or URLs', async (t) => {
    await new Promise((r) => setTimeout(r, 50));
    const all = JSON.stringify(a.lines);
    for (const s of [SECRET_TEXT, 'secret-4711', PRIMARY_TEXT, 'ßtraße', 'computer-first-page', 'computer-second-page', 'data:', 'about:blank', 'javascript']) {
      t.notOk(all.includes(s), `log never shows ${s}`);
    }
    t.ok(a.lines.some((l) => l.event === 'request' && l.route === '/clipboard'));
    t.ok(a.lines.some((l) => l.event === 'request' && l.route === '/browser/open' && l.status === 200));
  });
});
