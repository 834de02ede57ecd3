/**
 * WebSocket channels through the internal forward (control-plane/src/cluster/forward/forward-upgrade.ts; issue 24
 * item 5, issue 25 item 3), with the real ws library on both ends: the owner (a child process) greets with the
 * asserted organization and echoes text and a 4 MB binary message both ways; kill -9 of the owner closes the
 * caller's socket and leaves no channel open; a caller that goes away closes the owner's socket; an owner that
 * refuses the upgrade has its refusal relayed as it was.
 */
import t from 'tap';
import { WebSocketServer, type WebSocket } from 'ws';
import { connect, open, WsClient } from '../../helpers/gateway-ws.js';
import { startEdge, startOwner, startOwnerChild } from '../../helpers/forward-rig.js';

const MB = 1024 * 1024;

t.test('an echo both ways through the forward, then the owner is killed', async (t) => {
  const owner = await startOwnerChild(t);
  const edge = await startEdge(t, owner.address);
  const ws = await open(`ws://127.0.0.1:${edge.port}/v1/machines/mch_1/screen`, { authorization: 'Bearer sk_live_secretkey' });
  await ws.waitFor(() => ws.texts.length >= 1, 'the greeting');
  t.same(ws.texts[0], { hello: 'org_acme' });
  t.equal(edge.forwarder.channels(), 1);

  ws.sendJson({ ping: 1 });
  await ws.waitFor(() => ws.texts.length >= 2, 'the echo');
  t.same(ws.texts[1], { ping: 1 });
  const big = Buffer.alloc(4 * MB);
  for (let i = 0; i < big.length; i += 4096) big.writeUInt32BE(i, i);
  ws.ws.send(big);
  await ws.waitFor(() => ws.binaries.length >= 1, 'the 4 MB echo');
  t.ok(ws.binaries[0]!.equals(big), 'the 4 MB message came back byte for byte');

  await owner.kill9();
  const closed = await ws.closedP;
  t.equal(closed.code, 1006, 'the caller sees the connection drop (no close frame: the owner died)');
  await edge.nextLog((l) => l.event === 'forward_channel_closed');
  t.equal(edge.forwarder.channels(), 0);
  t.same(edge.logs.map((l) => [l.event, l.target, l.request_id]), [['forward_channel_closed', 'cp-owner', 'req_r1']]);
});

t.test('a caller that goes away closes the owner\'s socket; an owner\'s refusal is relayed', async (t) => {
  const wss = new WebSocketServer({ noServer: true });
  const ownerSockets: WebSocket[] = [];
  let ownerClosed: () => void = () => {};
  const ownerClosedP = new Promise<void>((r) => (ownerClosed = r));
  const owner = await startOwner(t, {
    request: (_req, res) => res.end(),
    upgrade: (req, socket, head) => {
      if (req.url?.endsWith('/refused')) {
        const body = JSON.stringify({ error: { code: 'not_found', message: 'No such machine.', request_id: 'req_r1', details: [], quota: null } });
        socket.end(`HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => {
        ownerSockets.push(ws);
        ws.on('close', () => ownerClosed());
        ws.send(JSON.stringify({ ready: true }));
      });
    },
  });
  const edge = await startEdge(t, owner.address);
  const ws = await open(`ws://127.0.0.1:${edge.port}/v1/machines/mch_1/events/live`);
  await ws.waitFor(() => ws.texts.length >= 1, 'ready');
  t.equal(ownerSockets.length, 1);
  ws.ws.terminate();
  await ownerClosedP;
  t.pass('the owner\'s socket closed when the caller went away');
  await ws.closedP;
  await edge.nextLog((l) => l.event === 'forward_channel_closed');
  t.equal(edge.forwarder.channels(), 0);

  const refused = await connect(`ws://127.0.0.1:${edge.port}/v1/machines/mch_1/refused`);
  t.notOk(refused instanceof WsClient);
  t.same(refused, { status: 404, body: { error: { code: 'not_found', message: 'No such machine.', request_id: 'req_r1', details: [], quota: null } } });
  t.equal(edge.forwarder.channels(), 0);
  t.same(edge.logs.map((l) => [l.event, l.target, l.request_id]), [['forward_channel_closed', 'cp-owner', 'req_r1']]);
});
