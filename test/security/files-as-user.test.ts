/**
 * Issue #10 item 4 (reads as root for read-only keys) and item 10 (a large write must not cost the
 * machine's other requests), attacked through /v1 against a real container machine.
 *
 * Before the fix the files API ran as guest root: a machines:read key read /etc/shadow and the memory
 * of root processes (/proc/<pid>/mem, a 500 at that), and a >= 31 MB write made a concurrent request 503.
 */
import t from 'tap';
import { containerMachineRig } from '../helpers/container-machine.js';

const q = encodeURIComponent;

t.test('files act as the agent user; root needs machines:control; process memory is denied', { timeout: 900_000 }, async (t) => {
  const m = await containerMachineRig(t);
  const id = await m.machine('files');
  const base = `/v1/machines/${id}`;
  const control = m.tenant.key;
  const { key: readOnly } = await m.rig.key(m.tenant.cookie, ['machines:read']);
  const get = (path: string, key: string, extra = '') => m.rig.call('GET', `${base}/files/content?path=${q(path)}${extra}`, { key });

  // A root process whose memory and environment an attacker wants.
  await m.exec(id, ['sh', '-c', 'SECRET_IN_ENV=hunter2 setsid sleep 600 > /dev/null 2>&1 < /dev/null &'], { user: 'root' });
  const pid = (await m.exec(id, ['pgrep', '-x', 'sleep'], { user: 'root' })).stdout.trim().split('\n')[0]!;
  t.match(pid, /^\d+$/, 'a root process to attack');

  for (const [who, key] of [['read-only key', readOnly], ['control key', control]] as const) {
    const shadow = await get('/etc/shadow', key);
    t.equal(shadow.status, 403, `${who}: /etc/shadow as the default (agent) user → 403`);
    t.match(shadow.json, { error: { code: 'permission_denied' } });
    t.notMatch(shadow.text, /root:/);
    const home = await m.rig.call('GET', `${base}/files?path=${q('/root')}`, { key });
    t.equal(home.status, 403, `${who}: /root cannot be listed as the agent user`);
  }

  const rootByReader = await get('/etc/shadow', readOnly, '&user=root');
  t.equal(rootByReader.status, 403, 'a read-only key cannot ask for root');
  t.match(rootByReader.json, { error: { code: 'permission_denied' } });
  t.match(rootByReader.json, { error: { message: /machines:control/ } });
  const listByReader = await m.rig.call('GET', `${base}/files?path=${q('/root')}&user=root`, { key: readOnly });
  t.equal(listByReader.status, 403, 'nor list as root');

  const rootByControl = await get('/etc/shadow', control, '&user=root');
  t.equal(rootByControl.status, 200, 'a control key reads /etc/shadow as root when it asks');
  t.match(rootByControl.json, { content: /^root:/m });

  for (const f of ['mem', 'environ', 'maps', 'pagemap']) {
    for (const [who, key, extra] of [['read-only key', readOnly, ''], ['control key as root', control, '&user=root']] as const) {
      const r = await get(`/proc/${pid}/${f}`, key, extra);
      t.equal(r.status, 403, `${who}: /proc/<root pid>/${f} → 403, not 500`);
      t.match(r.json, { error: { code: 'permission_denied' } });
      t.notMatch(r.text, /hunter2/);
    }
  }

  // Item 10: what the files API (a read-only key's way into the guest) shows of the host.
  for (const f of ['/proc/1/mountinfo', '/proc/1/mounts', '/proc/1/mountstats']) {
    const r = await get(f, readOnly);
    t.equal(r.status, 403, `${f} (host paths of bind-mount sources) is denied`);
  }
  const envFile = await get('/run/.containerenv', readOnly);
  t.notMatch(envFile.text, new RegExp(`${id}|${m.root}`), "podman's /run/.containerenv names neither the machine nor the substrate root");

  // Writes: the agent user by default, so the kernel refuses root's places and the file is the user's.
  const intoRoot = await m.rig.call('PUT', `${base}/files/content?path=${q('/root/planted')}`, { key: control, body: { content: 'x' } });
  t.equal(intoRoot.status, 403, 'the default user cannot write into /root');
  const etc = await m.rig.call('PUT', `${base}/files/content?path=${q('/etc/profile.d/zz-planted.sh')}`, { key: control, body: { content: 'x' } });
  t.equal(etc.status, 403, 'nor into /etc');
  const mine = await m.rig.call('PUT', `${base}/files/content?path=${q('/home/agent/dir/mine.txt')}`, { key: control, body: { content: 'mine' } });
  t.equal(mine.status, 200);
  const owners = await m.exec(id, ['stat', '-c', '%U', '/home/agent/dir/mine.txt', '/home/agent/dir']);
  t.equal(owners.stdout, 'agent\nagent\n', 'the file and directory it made belong to the agent user');
  const asRoot = await m.rig.call('PUT', `${base}/files/content?path=${q('/root/by-root')}`, { key: control, body: { content: 'r', user: 'root' } });
  t.equal(asRoot.status, 200, 'root writes where it asks to');

  // Item 10: a 31 MB write and a request issued while it is in flight on the machine's one session.
  const big = m.rig.call('PUT', `${base}/files/content?path=${q('/home/agent/big.bin')}`, {
    key: control, body: { content: Buffer.alloc(31 * 1024 * 1024, 0x41).toString('base64'), encoding: 'base64' },
  });
  await new Promise((r) => setTimeout(r, 20));
  const during = await m.rig.call('GET', `${base}/files?path=${q('/home/agent')}`, { key: readOnly });
  t.equal(during.status, 200, 'a request during a 31 MB write is answered');
  t.equal((await big).status, 200, 'the 31 MB write succeeds');
  t.equal((await m.exec(id, ['stat', '-c', '%s', '/home/agent/big.bin'])).stdout, '32505856\n');
});
