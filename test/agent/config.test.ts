import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAgentArgs } from '../../agent/src/config.js';
import { loadToken } from '../../agent/src/token.js';

t.test('flags', async (t) => {
  t.same(parseAgentArgs(['--help']), { help: true });
  const r = parseAgentArgs(['--socket', '/s', '--token-file', '/t', '--display', ':3', '--fbdir', '/fb']);
  t.equal(r.help, false);
  if (!r.help) {
    t.equal(r.config.socket, '/s');
    t.equal(r.config.display, ':3');
    t.equal(r.config.browserSandbox, 'on');
    t.equal(r.config.secretsDir, '/run/computer');
  }
  t.throws(() => parseAgentArgs(['--token-file', '/t']), /exactly one of --socket or --virtio-port/);
  t.throws(() => parseAgentArgs(['--socket', '/s', '--virtio-port', '/v', '--token-file', '/t']), /exactly one/);
  t.throws(() => parseAgentArgs(['--socket', '/s']), /--token-file or --token-fwcfg/);
  t.throws(() => parseAgentArgs(['--socket', '/s', '--token-file', '/t', '--display', '0']), /display is :N/);
  t.throws(() => parseAgentArgs(['--socket', '/s', '--token-file', '/t', '--bogus']), /Unknown option/);
  t.throws(() => parseAgentArgs(['--socket', '/s', '--token-file', '/t', '--browser-sandbox', 'maybe']));
});

t.test('token sources', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-token-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'token');
  fs.writeFileSync(file, 'a'.repeat(32) + '\n', { mode: 0o600 });
  t.equal(loadToken({ tokenFile: file }).token, 'a'.repeat(32), 'trailing newline trimmed');

  fs.chmodSync(file, 0o644);
  t.throws(() => loadToken({ tokenFile: file }), /group or others/, 'world-readable token file refused');

  fs.chmodSync(file, 0o600);
  fs.writeFileSync(file, 'short');
  t.throws(() => loadToken({ tokenFile: file }), /too short/);

  const fw = path.join(dir, 'fw', 'opt', 'computer', 'token');
  fs.mkdirSync(fw, { recursive: true });
  fs.writeFileSync(path.join(fw, 'raw'), 'b'.repeat(40));
  t.equal(loadToken({ tokenFwcfg: 'opt/computer/token' }, path.join(dir, 'fw')).token, 'b'.repeat(40));
  t.throws(() => loadToken({ tokenFwcfg: '../../etc/passwd' }, path.join(dir, 'fw')), /bad fw_cfg name/);
});
