/**
 * Terminal channel with real ws clients through the real control plane to the real agent's ptys:
 * byte-exact both ways, 4409 for a second client, detach keeps the pty, resize, exit closes the socket.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startGatewayRig } from '../helpers/gateway-rig.js';
import { connect, open, WsClient } from '../helpers/gateway-ws.js';

const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

t.test('terminal channel', { timeout: 120_000 }, async (t) => {
  const g = await startGatewayRig(t);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-term-'));
  // The pty runs as the unprivileged agent user.
  fs.chmodSync(work, 0o777);
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
  const base = `/v1/machines/${g.machineId}`;
  const openTerm = async (command: string[]) => {
    const r = await g.api('POST', `${base}/terminals`, { command, cols: 80, rows: 24 });
    if (r.status !== 200) throw new Error(`terminal open ${r.status} ${r.text}`);
    return r.json.id as string;
  };
  const attachUrl = (id: string) => `${g.wsBase}${base}/terminals/${id}/attach`;
  const output = (c: WsClient) => Buffer.concat(c.binaries);

  await t.test('every byte value travels unmodified both ways', async (t) => {
    const inFile = path.join(work, 'in.bin');
    const outFile = path.join(work, 'out.bin');
    fs.writeFileSync(outFile, all);
    const id = await openTerm(['sh', '-c', `stty raw -echo -iexten; echo READY; head -c 512 > ${inFile}; printf 'BEGIN>'; cat ${outFile}; printf '<END'; read x; exit 7`]);
    const egressBefore = g.egress.peek(g.machineId);
    const c = await open(attachUrl(id), g.auth);
    await c.waitFor(() => output(c).includes('READY'), 'READY');
    // Every byte value twice, in two binary messages: ^C, ^D, ^Z, ESC, DEL and invalid UTF-8 included.
    c.ws.send(all);
    c.ws.send(all);
    const out = await c.waitFor(() => (output(c).includes('<END') ? output(c) : null), '<END');
    t.ok(fs.readFileSync(inFile).equals(Buffer.concat([all, all])), 'input reached the program unmodified');
    const start = out.indexOf('BEGIN>') + 'BEGIN>'.length;
    t.ok(out.subarray(start, out.lastIndexOf('<END')).equals(all), 'output reached the client unmodified');
    c.ws.send(Buffer.from('\n'));
    const closed = await c.closedP;
    t.equal(closed.code, 1000, 'the pty exiting closes the socket normally');
    t.same(c.text('exit'), [{ type: 'exit', exit_code: 7 }], 'the exit code is sent first');
    t.equal(c.all[c.all.length - 1].type, 'exit', 'exit is the last message');
    t.ok(g.egress.peek(g.machineId) - egressBefore >= output(c).length, 'bytes sent are counted as egress');
  });

  await t.test('a second client is refused with 4409; detaching leaves the pty running', async (t) => {
    const id = await openTerm(['sh', '-c', 'while read l; do echo "got-$l"; done']);
    const first = await open(attachUrl(id), g.auth);
    first.ws.send(Buffer.from('one\n'));
    await first.waitFor(() => output(first).includes('got-one'), 'got-one');
    const second = await connect(attachUrl(id), g.auth);
    t.ok(second instanceof WsClient, 'the handshake completes');
    const closed = await (second as WsClient).closedP;
    t.equal(closed.code, 4409, 'then 4409');
    t.equal((second as WsClient).binaries.length, 0, 'and no pty bytes reach it');
    first.ws.send(Buffer.from('two\n'));
    await first.waitFor(() => output(first).includes('got-two'), 'got-two');
    t.pass('the first client is unaffected');

    await first.close();
    let listed: any;
    for (let i = 0; i < 100; i++) {
      listed = (await g.api('GET', `${base}/terminals`)).json.terminals.find((x: any) => x.id === id);
      if (listed && listed.attached === false) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    t.equal(listed?.attached, false, 'detached and still listed');
    const third = await open(attachUrl(id), g.auth);
    third.ws.send(Buffer.from('three\n'));
    await third.waitFor(() => output(third).includes('got-three'), 'got-three');
    t.pass('the same pty answers a new client');

    // Resize: a JSON text message, applied by the agent.
    third.sendJson({ type: 'resize', cols: 101, rows: 33 });
    await third.waitFor(() => third.text('resized').length, 'resized');
    t.same(third.text('resized')[0], { type: 'resized', cols: 101, rows: 33 });
    t.equal((await g.api('GET', `${base}/terminals`)).json.terminals.find((x: any) => x.id === id).cols, 101);
    third.sendJson({ type: 'resize', cols: 0, rows: 33 });
    await third.waitFor(() => third.text('error').length, 'error');
    t.equal(third.text('error')[0].code, 'invalid_request', 'a bad resize is an error message, not a close');

    // Killing the pty closes the socket.
    t.equal((await g.api('DELETE', `${base}/terminals/${id}`)).status, 204);
    const c3 = await third.closedP;
    t.equal(c3.code, 1000);
    t.equal(third.text('exit').length, 1, 'exit sent before the close');
  });

  await t.test('every byte a program wrote arrives before exit (100 runs)', async (t) => {
    // `seq 1 20000` through a pty: each line ends in CR LF (onlcr); 128,894 bytes in all. Pinned literally.
    const seqOut = Buffer.from(Array.from({ length: 20000 }, (_, i) => `${i + 1}\r\n`).join(''));
    t.equal(seqOut.length, 128_894);
    const expected = Buffer.concat([Buffer.from('READY\r\n'), seqOut]);
    const one = async () => {
      // Output starts once the client is attached, so it travels live through the gateway.
      const id = await openTerm(['sh', '-c', 'stty -echo; echo READY; read go; seq 1 20000']);
      const c = await open(attachUrl(id), g.auth);
      await c.waitFor(() => output(c).includes('READY\r\n'), 'READY');
      c.ws.send(Buffer.from('\n'));
      await c.closedP;
      const exit = c.text('exit');
      return { exact: output(c).equals(expected) && exit.length === 1 && exit[0].exit_code === 0, bytes: output(c).length };
    };
    let exact = 0;
    const short: number[] = [];
    for (let i = 0; i < 100; i += 10) {
      for (const r of await Promise.all(Array.from({ length: 10 }, one))) {
        if (r.exact) exact++;
        else short.push(r.bytes);
      }
    }
    t.equal(exact, 100, `byte-exact, then exit 0, in every run (others got ${short.join(', ')} bytes)`);
  });

  await t.test('refusals', async (t) => {
    const id = await openTerm(['sleep', '60']);
    const anon = await connect(attachUrl(id));
    t.notOk(anon instanceof WsClient);
    t.equal((anon as any).status, 401);
    t.equal((anon as any).body.error.code, 'unauthenticated', 'the API envelope');
    const reader = await g.rig.key(g.tenant.cookie, ['machines:read']);
    const ro = await connect(attachUrl(id), { authorization: `Bearer ${reader.key}` });
    t.equal((ro as any).status, 403, 'a terminal needs machines:control');
    const other = await g.rig.tenant('developer');
    const foreign = await connect(attachUrl(id), { authorization: `Bearer ${other.key}` });
    t.equal((foreign as any).status, 404, "another organization's machine is not found");
    t.equal((foreign as any).body.error.code, 'not_found');
    const missing = await open(`${g.wsBase}${base}/terminals/term_doesnotexist/attach`, g.auth);
    t.equal((await missing.closedP).code, 4404, 'an unknown terminal closes with 4404');
  });
});
