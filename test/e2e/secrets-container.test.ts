/**
 * Secrets end to end on the container substrate with the real guest image and agent: delivery into the
 * machine's tmpfs (mode, owner, file system), a login shell sees it, the files API cannot read it back,
 * a real Chromium page gets a secret typed by reference, a fork carries none, a revoke removes it from
 * the machine, a restart delivers again; then every answer and log line is scanned for the values.
 * Values never come back through exec either: the guest compares them (stdin, hashes) and prints verdicts.
 * Needs root, podman and runc; the image is built on first use (minutes), then cached.
 */
import t, { type Test } from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import type { LogLine } from '../../control-plane/src/log.js';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

const SCOPES = ['machines:read', 'machines:write', 'machines:control', 'sessions:write', 'secrets:write'];
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
/** FNV-1a over UTF-16 code units: the test page computes the same, so its title proves what was typed. */
const fnv1a = (s: string) => {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16);
};

async function until<T>(what: string, fn: () => Promise<T | null>, tries = 240, everyMs = 250): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await fn();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`gave up waiting for ${what}`);
}

t.test('secrets on a real container machine', { timeout: 1_200_000 }, async (t) => {
  const serviceLog: LogLine[] = [];
  const { rig, created } = await containerMachinesRig(t, '/tmp/cps-', { log: (l) => serviceLog.push(l) });

  const a = await rig.tenant('pro', SCOPES);
  const key = a.key;
  const m = (await rig.call('POST', '/v1/machines', { key, body: { name: 'secrets' } })).json;
  created.push(m.id);
  const base = `/v1/machines/${m.id}`;
  const exec = async (id: string, command: string[], opts: { user?: 'root' | 'agent'; stdin?: string } = {}) => {
    const r = await rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command, ...opts } });
    return r.status === 200 ? r.json : null;
  };
  await until('the agent', () => exec(m.id, ['true']));

  // Quotes, dollar signs, backticks and spaces: the value must survive the shell file verbatim.
  const value = `p4ss-${randomBytes(12).toString('hex')} it's "$HOME" \`id\` \\n end`;
  const started = Date.now();
  const put = await rig.call('PUT', `${base}/secrets`, { key, body: { name: 'DB_PASSWORD', value } });
  t.equal(put.status, 200, 'stored');
  const inFile = await until('the secrets file in the machine', async () => {
    const r = await exec(m.id, ['sh', '-c', 'grep -c "^DB_PASSWORD=" /run/computer/secrets.env'], { user: 'root' });
    return r?.stdout === '1\n' ? r : null;
  }, 120, 50);
  t.ok(inFile, 'delivered into the running machine');
  t.comment(`delivery observed ${Date.now() - started} ms after the PUT was sent (the spec asks for seconds)`);
  t.type(put.json.delivered_at, 'string', 'the PUT answered after delivery: delivered_at set');
  t.equal((await rig.call('GET', `${base}/secrets`, { key })).json.data[0].delivered_at, put.json.delivered_at);

  const st = await exec(m.id, ['sh', '-c', 'stat -c "%a %U %G" /run/computer/secrets.env; stat -f -c %T /run/computer; stat -c "%a %U" /run/computer'], { user: 'root' });
  t.equal(st!.stdout, '600 agent agent\ntmpfs\n755 root\n', 'mode 0600, owned by the agent user, on a tmpfs, in a root-owned directory');
  const profile = await exec(m.id, ['sh', '-c', 'wc -l < /etc/profile.d/10-computer-secrets.sh; grep -c -F -f - /etc/profile.d/10-computer-secrets.sh'], { user: 'root', stdin: value.slice(0, 20) });
  t.equal(profile!.stdout, '3\n0\n', 'the profile script: three lines, no value');

  const login = await exec(m.id, ['bash', '-lc', 'printf %s "$DB_PASSWORD" | sha256sum']);
  t.equal(login!.stdout, `${sha256(value)}  -\n`, 'a login shell of the agent user sees the exact value');
  const loginRoot = await exec(m.id, ['bash', '-lc', 'printf %s "$DB_PASSWORD" | sha256sum'], { user: 'root' });
  t.equal(loginRoot!.stdout, `${sha256(value)}  -\n`, 'and so does root\'s');
  const plain = await exec(m.id, ['sh', '-c', 'echo "${DB_PASSWORD-unset}"']);
  t.equal(plain!.stdout, 'unset\n', 'a non-login process does not get it in its environment');
  const readBack = await rig.call('GET', `${base}/files/content?path=${encodeURIComponent('/run/computer/secrets.env')}`, { key });
  t.equal(readBack.status, 403, 'the files API cannot read the value back');

  // --- typed by reference into a real Chromium page ------------------------------------------------
  await until('the desktop', async () => ((await rig.call('GET', `${base}/display`, { key })).status === 200 ? true : null));
  const sid = (await rig.call('POST', '/v1/sessions', { key, body: { machine_id: m.id, type: 'agent' } })).json.id;
  const fence = String((await rig.call('POST', `${base}/input-lease`, { key, body: { session_id: sid, ttl_seconds: 600 } })).json.fence);
  const input = { 'x-session-id': sid, 'x-lease-fence': fence };
  // One field filling the page; its title reports a hash and the length of what the field holds.
  const page = `<title>secret-login</title><body style="margin:0"><input id="f" autofocus style="width:100vw;height:100vh;font-size:32px">
<script>const f=document.getElementById('f');f.addEventListener('input',()=>{let h=0x811c9dc5;for(let i=0;i<f.value.length;i++)h=Math.imul(h^f.value.charCodeAt(i),0x01000193)>>>0;document.title='typed:'+h.toString(16)+':'+f.value.length;});</script>`;
  const opened = await rig.call('POST', `${base}/browser/open`, { key, body: { url: `data:text/html,${encodeURIComponent(page)}` }, headers: input });
  t.equal(opened.status, 200, 'Chromium opened the login page');
  const title = (pattern: string) => exec(m.id, ['sh', '-c', `xdotool search --name '${pattern}' getwindowname %@ 2>/dev/null | head -1`]);
  await until('the login page', async () => ((await title('secret-login'))?.stdout.includes('secret-login') ? true : null), 240, 500);
  const click = await rig.call('POST', `${base}/mouse/click`, { key, body: { at: { x: 640, y: 400 } }, headers: input });
  t.equal(click.status, 200, 'focused the field');
  const typed = await rig.call('POST', `${base}/keyboard/type`, { key, body: { secret: 'DB_PASSWORD' }, headers: input });
  t.equal(typed.status, 200, 'typed by reference');
  t.same(Object.keys(typed.json).sort(), ['display', 'pointer']);
  const want = `typed:${fnv1a(value)}:${value.length}`;
  const seen = await until('the typed value in the page', async () => {
    const r = await title('^typed:');
    return r && r.stdout.startsWith(want) ? r.stdout : null;
  }, 120, 250).catch(async () => (await title('^typed:'))?.stdout ?? 'no title');
  t.match(seen, new RegExp(`^${want}\\b`), 'the page field holds exactly the stored value');
  assertNotFound(t, await rig.call('POST', `${base}/keyboard/type`, { key, body: { secret: 'NOT_STORED' }, headers: input }));

  // --- a fork carries no secret ---------------------------------------------------------------------
  const fork = await rig.call('POST', `${base}/fork`, { key, body: { name: 'secrets-fork' } });
  t.equal(fork.status, 201, 'forked');
  created.push(fork.json.id);
  await until('the fork\'s agent', () => exec(fork.json.id, ['true']));
  const inFork = await exec(fork.json.id, ['sh', '-c', 'test -e /run/computer/secrets.env && echo present || echo absent; bash -lc \'echo "${DB_PASSWORD-unset}"\'; grep -rlF -f - /etc /home /root /tmp /var/tmp 2>/dev/null | head -3; echo end'], { user: 'root', stdin: value.slice(0, 24) });
  t.equal(inFork!.stdout, 'absent\nunset\nend\n', 'no secrets file, nothing in a login shell, the value nowhere on the fork\'s disk');
  t.same((await rig.call('GET', `/v1/machines/${fork.json.id}/secrets`, { key })).json.data, [], 'the fork has no stored secrets');
  t.equal((await rig.call('DELETE', `/v1/machines/${fork.json.id}`, { key })).status, 204);

  // --- revoke ---------------------------------------------------------------------------------------
  t.equal((await rig.call('DELETE', `${base}/secrets/DB_PASSWORD`, { key })).status, 204, 'revoked');
  const gone = await until('the revocation in the machine', async () => {
    const r = await exec(m.id, ['bash', '-lc', 'echo "${DB_PASSWORD-unset}"; grep -c "^DB_PASSWORD=" /run/computer/secrets.env']);
    return r?.stdout === 'unset\n0\n' ? r : null;
  }, 120, 50);
  t.ok(gone, 'removed from the running machine');

  // --- restart delivers again -------------------------------------------------------------------------
  const token = `tok-${randomBytes(12).toString('hex')}`;
  const put2 = await rig.call('PUT', `${base}/secrets`, { key, body: { name: 'API_TOKEN', value: token } });
  t.equal(put2.json.version, 1);
  t.equal((await rig.call('POST', `${base}/restart`, { key })).json.state, 'running', 'restarted');
  const again = await until('redelivery after the restart', async () => {
    const r = await exec(m.id, ['bash', '-lc', 'printf %s "$API_TOKEN" | sha256sum']);
    return r?.stdout === `${sha256(token)}  -\n` ? r : null;
  });
  t.ok(again, 'the restarted machine has it again, from storage');
  const listed = await until('delivered_at for the new boot', async () => {
    const s = (await rig.call('GET', `${base}/secrets`, { key })).json.data[0];
    return s.delivered_at && s.delivered_at !== put2.json.delivered_at ? s : null;
  }, 40);
  t.match(listed, { name: 'API_TOKEN', version: 1 });

  t.equal((await rig.call('DELETE', base, { key })).status, 204, 'deleted');
  t.same((await rig.call('GET', '/v1/secrets', { key })).json.data, [], 'its secrets went with it');

  const everything = [...rig.bodies, ...rig.logs.map((l) => JSON.stringify(l)), ...serviceLog.map((l) => JSON.stringify(l))].join('\n');
  for (const v of [value, token]) {
    t.notOk(everything.includes(v.slice(0, 29)), 'no answer or log line holds a value');
  }
});

function assertNotFound(t: Test, r: { status: number; json: any }) {
  t.equal(r.status, 404, 'an unknown secret name → 404');
  t.equal(r.json.error.code, 'not_found');
}
