import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { createSecretStore, isMemoryBacked, parseSecretsFile, renderSecretsFile } from '../../agent/src/secrets/store.js';
import { secretsRoutes } from '../../agent/src/routes/secrets.js';
import { execRoutes } from '../../agent/src/routes/exec.js';
import { filesRoutes } from '../../agent/src/routes/files.js';
import { createFileService } from '../../agent/src/files/service.js';
import { lookupUser } from '../../agent/src/users.js';
import { isAppError } from '../../shared/errors.js';
import { agentPaths, startAgent, q, type TestAgent } from '../helpers/agent-files-exec.js';

const agentUser = lookupUser('agent')!;
let agent: TestAgent;
let secretsDir: string;
let profileScript: string;
const mounted: string[] = [];

const VALUES: Record<string, string> = {
  QUOTES: `it's a "quoted" value with 'single' and "double"`,
  MULTILINE: 'first line\nsecond line\n\nfourth after blank\n',
  EXPANSIONS: '$(touch /tmp/pwned-by-secret) `id` $HOME ${PATH} $((1+1)) !! \\$',
  BACKSLASH: 'back\\slash \\\' \\n \\\\',
  JUST_QUOTE: "'",
  ESCAPED_QUOTE: "'\\''",
  UNICODE: 'Spaß naïve 日本語 ✓ 🎉',
  EMPTY: '',
  CONTROL: Array.from({ length: 126 }, (_, i) => String.fromCharCode(i + 1)).join(''),
  LEADING_DASH: '-n -e --',
  BIG: 'v'.repeat(60 * 1024),
  SECRET_TOKEN_X: 'sk-live-' + randomBytes(12).toString('hex'),
};

t.before(async () => {
  const p = agentPaths('secrets-');
  // Like /run: searchable by the agent user, whose login shell reads the file.
  fs.chmodSync(p.dir, 0o755);
  secretsDir = path.join(p.dir, 'run-computer');
  fs.mkdirSync(secretsDir);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', secretsDir]);
  mounted.push(secretsDir);
  // A real profile.d entry (unique name) so a real login shell loads it; removed at teardown.
  profileScript = `/etc/profile.d/zz-computer-test-${randomBytes(4).toString('hex')}.sh`;
  const store = createSecretStore({ dir: secretsDir, profileScript, userName: 'agent' });
  const files = createFileService({ deny: { enrollFile: p.enrollFile, channelPaths: [p.sock], extraPaths: [secretsDir] } });
  // One root FileService for both users: this file tests file semantics, not the user switch (files-user.test.ts).
  agent = await startAgent(p, [secretsRoutes(store), execRoutes(), filesRoutes({ root: files, agent: files })]);
});
t.teardown(async () => {
  fs.rmSync(profileScript, { force: true });
  for (const m of mounted.reverse()) {
    try {
      execFileSync('umount', [m]);
    } catch {
      /* already */
    }
  }
  await agent.close();
});

const loginShellValue = async (name: string): Promise<string> => {
  const r = await agent.client.request('POST', '/exec', { command: ['bash', '-lc', `printf 'B3G1N<%s>3ND' "\${${name}-__unset__}"`] });
  const out: string = r.json().stdout;
  return out.slice(out.indexOf('B3G1N<') + 6, out.lastIndexOf('>3ND'));
};

t.test('format round trip (pure)', async (t) => {
  t.same(parseSecretsFile(renderSecretsFile(VALUES)), VALUES);
  t.same(parseSecretsFile(''), {});
  t.throws(() => parseSecretsFile('A=unquoted\n'));
});

t.test('replace delivers the whole set; a login shell sees every value exactly', async (t) => {
  const r = await agent.client.request('PUT', '/secrets', { secrets: VALUES });
  t.equal(r.status, 200);
  const body = r.json();
  t.same(body.names, Object.keys(VALUES).sort());
  t.ok(!Number.isNaN(Date.parse(body.delivered_at)));
  t.same(Object.keys(body).sort(), ['delivered_at', 'names'], 'names and time only');
  for (const [name, value] of Object.entries(VALUES)) {
    t.equal(await loginShellValue(name), value, `login shell sees ${name}`);
  }
  t.notOk(fs.existsSync('/tmp/pwned-by-secret'), 'values are never evaluated');

  const file = path.join(secretsDir, 'secrets.env');
  const st = fs.statSync(file);
  t.equal(st.mode & 0o777, 0o600);
  t.equal(st.uid, agentUser.uid, 'owned by the agent user');
  t.ok(isMemoryBacked(secretsDir), 'on tmpfs');
  t.same(fs.readdirSync(secretsDir), ['secrets.env'], 'no temp file left');
  const ds = fs.statSync(secretsDir);
  t.equal(ds.mode & 0o7777, 0o755, 'the directory is not world-writable (a fresh tmpfs is 1777)');
  t.equal(ds.uid, 0);

  const script = fs.readFileSync(profileScript, 'utf8');
  t.equal(script.endsWith('\n') ? script.slice(0, -1).split('\n').length : -1, 3, 'profile script has exactly three lines');
  t.ok(script.includes(file));
  for (const v of Object.values(VALUES)) if (v.length > 2) t.notOk(script.includes(v), 'no value in the profile script');
  t.equal(fs.statSync(profileScript).mode & 0o777, 0o644);
});

t.test('replace removes names not in the new set; delete removes one', async (t) => {
  let r = await agent.client.request('PUT', '/secrets', { secrets: { ALPHA: 'a1', BETA: 'b1' } });
  t.same(r.json().names, ['ALPHA', 'BETA']);
  r = await agent.client.request('PUT', '/secrets', { secrets: { BETA: 'b2', GAMMA: 'g2' } });
  t.same(r.json().names, ['BETA', 'GAMMA']);
  t.equal(await loginShellValue('ALPHA'), '__unset__', 'replaced away');
  t.equal(await loginShellValue('QUOTES'), '__unset__');
  t.equal(await loginShellValue('BETA'), 'b2');

  r = await agent.client.request('DELETE', '/secrets/BETA');
  t.equal(r.status, 200);
  t.same(r.json().names, ['GAMMA']);
  t.equal(await loginShellValue('BETA'), '__unset__');
  t.equal(await loginShellValue('GAMMA'), 'g2');
  t.notOk(fs.readFileSync(path.join(secretsDir, 'secrets.env'), 'utf8').includes('BETA'));

  r = await agent.client.request('DELETE', '/secrets/NOT_DELIVERED');
  t.equal(r.status, 200, 'deleting an absent name is idempotent');
  t.same(r.json().names, ['GAMMA']);
  r = await agent.client.request('PUT', '/secrets', { secrets: {} });
  t.same(r.json().names, []);
  t.equal(fs.readFileSync(path.join(secretsDir, 'secrets.env'), 'utf8'), '');
});

t.test('refusals', async (t) => {
  for (const body of [{ secrets: { 'bad-name': 'x' } }, { secrets: { lower: 'x' } }, { secrets: { NUL: 'a\u0000b' } }, { secrets: { BIG: 'x'.repeat(65537) } }, { secrets: [] }, {}]) {
    const r = await agent.client.request('PUT', '/secrets', body);
    t.equal(r.status, 400, JSON.stringify(body).slice(0, 60));
    t.equal(r.json().error.code, 'invalid_request');
  }
  const r = await agent.client.request('DELETE', '/secrets/lower-case');
  t.equal(r.status, 400);
  t.equal(r.json().error.details[0].field, 'name');
});

t.test('the files API refuses the secrets directory (wired as a denied path)', async (t) => {
  await agent.client.request('PUT', '/secrets', { secrets: { FILES_PROBE: 'probe-value-e2f1' } });
  const r = await agent.client.request('GET', `/files/content?path=${q(path.join(secretsDir, 'secrets.env'))}`);
  t.equal(r.status, 403);
  t.notOk(r.body.toString().includes('probe-value-e2f1'));
  const l = await agent.client.request('GET', `/files?path=${q(secretsDir)}`);
  t.equal(l.status, 403);
});

t.test('a directory on disk: mounted as tmpfs, or refused, never written to disk', async (t) => {
  const base = fs.mkdtempSync('/tmp/secrets-disk-');
  t.teardown(() => fs.rmSync(base, { recursive: true, force: true }));
  const onDisk = path.join(base, 'refused');
  fs.mkdirSync(onDisk);
  t.notOk(isMemoryBacked(onDisk), 'precondition: /tmp is disk-backed here');
  const refusing = createSecretStore({
    dir: onDisk,
    profileScript: path.join(base, 'profile.sh'),
    userName: 'agent',
    mountTmpfs: async () => {
      throw new Error('mount refused');
    },
  });
  try {
    await refusing.replace({ DISK: 'must-not-hit-disk' });
    t.fail('should refuse');
  } catch (e) {
    t.ok(isAppError(e) && e.code === 'internal_error', 'refused with internal_error');
  }
  t.same(fs.readdirSync(onDisk), [], 'nothing written');

  const mountable = path.join(base, 'mountable');
  const store = createSecretStore({ dir: mountable, profileScript: path.join(base, 'profile2.sh'), userName: 'agent' });
  const res = await store.replace({ MOUNTED: 'ok' });
  mounted.push(mountable);
  t.same(res.names, ['MOUNTED']);
  t.ok(isMemoryBacked(mountable), 'a tmpfs was mounted there first');
  execFileSync('umount', [mountable]);
  mounted.pop();
  t.same(fs.readdirSync(mountable), [], 'the disk underneath never saw the file');
});

t.test('logs never carry values', async (t) => {
  await new Promise((r) => setTimeout(r, 20));
  const log = agent.logText();
  for (const v of [VALUES.SECRET_TOKEN_X!, VALUES.UNICODE!, 'b2', 'g2', 'probe-value-e2f1', 'first line']) t.notOk(log.includes(v), 'value not logged');
  t.ok(agent.lines.some((l) => l.event === 'request' && l.route === '/secrets' && l.status === 200));
  t.ok(agent.lines.some((l) => l.event === 'request' && l.route === '/secrets/:name' && l.status === 200));
});
