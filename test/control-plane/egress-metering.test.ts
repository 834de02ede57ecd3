/**
 * Egress counts what leaves the service on a machine's behalf (docs/usage-and-billing.md, "What egress
 * counts"): every /v1 answer produced by its agent (exec output, screenshots, display, clipboard, …) by
 * its body's bytes, through the real app and the real agent's exec route behind the fake substrate; and a
 * preview response's head, exactly the bytes Node wrote for it on a real connection.
 */
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { countResponseHead, sentHeadBytes } from '../../control-plane/src/previews/egress.js';
import { EgressTally } from '../../control-plane/src/services/metering.js';
import { fakeAgentsRig } from '../helpers/machines-fake-agent.js';

t.test('machine answers through /v1 count as the machine egress, byte for byte', async (t) => {
  const { rig } = await fakeAgentsRig(t);
  const a = await rig.tenant('pro');
  const m = (await rig.call('POST', '/v1/machines', { key: a.key, body: {} })).json;
  const egress = rig.services.metering.egress;
  const counted = async (method: string, path: string, body?: unknown) => {
    const before = egress.peek(m.id);
    const r = await rig.call(method, `/v1/machines/${m.id}${path}`, { key: a.key, body });
    t.equal(r.status, 200, `${method} ${path}: ${r.text.slice(0, 200)}`);
    return { bytes: Buffer.byteLength(r.text), counted: egress.peek(m.id) - before, text: r.text };
  };

  const out = 'x'.repeat(5000);
  const exec = await counted('POST', '/exec', { command: ['printf', out] });
  t.match(exec.text, out, 'the exec answer carries the output');
  t.ok(exec.bytes > 5000);
  t.equal(exec.counted, exec.bytes, 'exec output: the whole answer counted');

  const shot = await counted('GET', '/screenshot');
  t.equal(shot.counted, shot.bytes, 'a screenshot: the whole answer counted');
  t.ok(shot.bytes > 0);

  const display = await counted('GET', '/display');
  t.equal(display.counted, display.bytes, 'display info too');

  // Our own answers about the machine are not the machine's egress.
  const before = egress.peek(m.id);
  t.equal((await rig.call('GET', `/v1/machines/${m.id}`, { key: a.key })).status, 200);
  t.equal(egress.peek(m.id), before, 'the machine record is not counted');
});

t.test('a preview response head counts the bytes Node wrote for it', async (t) => {
  const tally = new EgressTally();
  const seen: Array<{ before: number; wrote: number; counted: number }> = [];
  const server = http.createServer((req, res) => {
    const before = sentHeadBytes(res);
    const start = res.socket!.bytesWritten;
    // As the proxy writes a guest's head: a raw header list, then flushed at once.
    res.writeHead(200, 'OK', ['Content-Type', 'text/plain', 'X-App', 'ünïcode-free value', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2']);
    res.flushHeaders();
    const wrote = res.socket!.bytesWritten - start;
    countResponseHead(tally, 'mch_a', res);
    seen.push({ before, wrote, counted: tally.peek('mch_a') });
    res.end('body');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((r, j) => http.get({ port, host: '127.0.0.1', agent: false }, (res) => res.resume().on('end', () => r())).on('error', j));
  t.equal(seen.length, 1);
  t.equal(seen[0]!.before, 0, 'nothing before the head is sent');
  t.ok(seen[0]!.wrote > 150, `the head went out (${seen[0]!.wrote} bytes)`);
  t.equal(seen[0]!.counted, seen[0]!.wrote, 'counted exactly what was written for the head');
});
