import t from 'tap';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';

const res = { vcpu: 2, memory_mb: 4096, disk_gb: 10 };

t.test('fake substrate: lifecycle, capture/fork, injected failures and delays, channel', async (t) => {
  const echo = new FakeSubstrate({
    channelHandler: (_id, guest) => guest.on('data', (d: Buffer) => guest.write(Buffer.concat([Buffer.from('echo:'), d]))),
  });
  await echo.create({ id: 'm1', resources: res, source: { kind: 'base' } });
  t.equal(await echo.status('m1'), 'running');
  echo.machines.get('m1')!.files.set('/home/agent/a.txt', 'hello');
  const cap = await echo.capture('m1', 'snap1');
  t.equal(cap.live, true);
  t.equal(cap.bytes, 5);
  await echo.create({ id: 'm2', resources: res, source: { kind: 'layer', layerId: cap.layerId } }, { start: false });
  t.equal(await echo.status('m2'), 'stopped');
  t.equal(echo.machines.get('m2')!.files.get('/home/agent/a.txt'), 'hello', 'fork sees the captured file');

  const ch = await echo.openChannel('m1');
  const got = new Promise<string>((r) => ch.once('data', (d: Buffer) => r(d.toString())));
  ch.write('ping');
  t.equal(await got, 'echo:ping');
  ch.end();

  echo.failNext('start');
  await t.rejects(echo.start('m2'), { code: 'compute_unavailable' });
  await echo.start('m2');
  t.equal(await echo.status('m2'), 'running', 'only the next call failed');

  await t.rejects(echo.replaceDisk('m2', { kind: 'base' }), { code: 'conflict' }, 'running disk cannot be replaced');
  await echo.stop('m2');
  await echo.replaceDisk('m2', { kind: 'base' });
  t.equal(echo.machines.get('m2')!.files.size, 0);

  echo.lose('m1');
  t.same(await echo.reattach(), [
    { id: 'm1', status: 'lost' },
    { id: 'm2', status: 'stopped' },
  ]);
  await echo.destroy('m1');
  t.equal(await echo.status('m1'), 'absent');
  await t.rejects(echo.start('m1'), { code: 'not_found' });
  await t.rejects(echo.create({ id: 'm2', resources: res, source: { kind: 'base' } }), { code: 'conflict' });
  await t.rejects(echo.create({ id: 'bad id!', resources: res, source: { kind: 'base' } }), { code: 'invalid_request' });

  echo.setDelay('stop', 30);
  let done = false;
  const p = echo.stop('m2').then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  t.equal(done, false, 'a delayed operation is still pending after a tick');
  await p;
  t.ok(echo.calls.includes('stop:m2'));
});
