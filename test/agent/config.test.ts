import t from 'tap';
import { parseAgentArgs } from '../../agent/src/config.js';

t.test('flags', async (t) => {
  t.same(parseAgentArgs(['--help']), { help: true });
  const r = parseAgentArgs(['--socket', '/s', '--enroll-file', '/e', '--display', ':3', '--fbdir', '/fb']);
  t.equal(r.help, false);
  if (!r.help) {
    t.equal(r.config.socket, '/s');
    t.equal(r.config.enrollFile, '/e');
    t.equal(r.config.display, ':3');
    t.equal(r.config.browserSandbox, 'on');
    t.equal(r.config.secretsDir, '/run/computer');
  }
  const vm = parseAgentArgs(['--virtio-port', '/dev/virtio-ports/computer.agent']);
  t.equal(!vm.help && vm.config.enrollFile, undefined, 'a virtio port needs no secret');
  t.throws(() => parseAgentArgs(['--enroll-file', '/e']), /exactly one of --socket or --virtio-port/);
  t.throws(() => parseAgentArgs(['--socket', '/s', '--virtio-port', '/v', '--enroll-file', '/e']), /exactly one/);
  t.throws(() => parseAgentArgs(['--socket', '/s']), /--socket needs --enroll-file/);
  t.throws(() => parseAgentArgs(['--virtio-port', '/v', '--enroll-file', '/e']), /--enroll-file is for --socket only/);
  t.throws(() => parseAgentArgs(['--socket', '/s', '--token-file', '/t']), /Unknown option/, 'the old static token flag is gone');
  t.throws(() => parseAgentArgs(['--socket', '/s', '--enroll-file', '/e', '--display', '0']), /display is :N/);
  t.throws(() => parseAgentArgs(['--socket', '/s', '--enroll-file', '/e', '--bogus']), /Unknown option/);
  t.throws(() => parseAgentArgs(['--socket', '/s', '--enroll-file', '/e', '--browser-sandbox', 'maybe']));
});
