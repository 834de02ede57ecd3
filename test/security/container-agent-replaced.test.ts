/**
 * Item 8 from inside a real container machine: guest root freezes the agent (the init would restart a
 * killed one) and serves the channel socket with its own HTTP/2 server answering junk, wrongly shaped
 * JSON, never-ending answers and a screen frame with a negative length. Through /v1 and the gateway the
 * control plane answers clean 503 compute_unavailable envelopes, never hangs, and another tenant's machine
 * on the same host keeps working.
 */
import t from 'tap';
import { guestRunner } from '../helpers/container-guest.js';
import { assertEnvelope } from '../helpers/control-plane.js';
import { open } from '../helpers/gateway-ws.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';
import { containerMachinesRig } from '../helpers/substrate-rigs.js';
import type { LogLine } from '../../control-plane/src/log.js';

t.setTimeout(900_000);

/** The guest's replacement agent: it accepts any enrollment, then every route answers wrongly; it notes each path it served. */
const EVIL = String.raw`
const http2 = require('node:http2');
const fs = require('node:fs');
const sock = '/run/computer-channel/agent.sock';
const frame = (h) => { const j = Buffer.from(JSON.stringify(h)); const l = Buffer.alloc(4); l.writeUInt32BE(j.length); return Buffer.concat([l, j]); };
const server = http2.createServer();
server.on('stream', (s, h) => {
  const p = String(h[':path']).split('?')[0];
  fs.appendFileSync('/root/evil.log', p + '\n');
  s.on('error', () => {});
  if (p === '/auth/enroll') { s.respond({ ':status': 204 }); s.end(); }
  else if (p === '/display') { s.respond({ ':status': 200 }); s.end('<owned>'); }
  else if (p === '/screenshot') { s.respond({ ':status': 200, 'content-type': 'application/json' }); s.end('{"image":5,"format":"gif"}'); }
  else if (p === '/screen/stream') {
    s.respond({ ':status': 200 });
    s.write(frame({ type: 'status', up: true, width: 1280, height: 800, bytes: 0 }));
    s.write(frame({ type: 'frame', seq: 0, format: 'jpeg', width: 1280, height: 800, captured_at: 1, bytes: -30 }));
  }
  else { /* never answers */ }
});
try { fs.unlinkSync(sock); } catch {}
server.listen(sock, () => fs.writeFileSync('/root/evil.ready', ''));
`;

t.test('a replaced agent inside a real container cannot hang or lie through the control plane', async (t) => {
  const { rig, substrate, created } = await containerMachinesRig(t, '/tmp/cps-', {
    readyProbe: false, agentTimeouts: { connectMs: 5000, requestMs: 3000 },
  });
  const gatewayLogs: LogLine[] = [];
  const served = await serveWithGateway(rig, { deps: { log: (l) => gatewayLogs.push(l), agentTimeoutMs: 3000 }, gateway: { screen: { retryMs: 60_000 } } });
  t.teardown(() => served.close());
  const guest = guestRunner(substrate);

  const victim = await rig.tenant('pro');
  const attacker = await rig.tenant('pro');
  const mk = async (key: string, name: string) => {
    const r = await rig.call('POST', '/v1/machines', { key, body: { name } });
    t.equal(r.status, 201, `machine ${name}`);
    created.push(r.json.id);
    return r.json.id as string;
  };
  const A = await mk(victim.key, 'victim');
  const B = await mk(attacker.key, 'attacker');
  const exec = async (key: string, id: string, word: string) =>
    rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['echo', word], user: 'root' } });
  for (const [key, id] of [[victim.key, A], [attacker.key, B]] as const) {
    for (let i = 0; i < 60 && (await exec(key, id, 'up')).status !== 200; i++) await new Promise((r) => setTimeout(r, 500));
  }
  t.equal((await exec(victim.key, A, 'before')).json.stdout, 'before\n', 'the victim machine answers');

  // Guest root of B: freeze the agent and put its own server on the channel socket.
  const evil = await guest(B, `cat > /root/evil.js <<'EOF'\n${EVIL}\nEOF
    kill -STOP $(pgrep -f '^/usr/bin/node /opt/computer/dist/agent/src/main[.]js')
    nohup setsid /usr/bin/node /root/evil.js </dev/null >/dev/null 2>&1 &
    for i in $(seq 1 100); do [ -e /root/evil.ready ] && break; sleep 0.1; done; ls /root/evil.ready`);
  t.equal(evil.code, 0, `the replacement agent listens ${evil.err}`);
  // The pooled connection still goes to the frozen agent: the control plane finds that out by its
  // deadline; dropping it here just makes the next request dial the socket now.
  rig.services.pool.drop(B);

  const k = { key: attacker.key };
  for (const [what, p] of [['not JSON', `/v1/machines/${B}/display`], ['wrong shape', `/v1/machines/${B}/screenshot`], ['never answers', `/v1/machines/${B}/files?path=%2Ftmp`]]) {
    const r = await rig.call('GET', p!, k);
    assertEnvelope(t, r, 'compute_unavailable', 503);
    t.notMatch(r.text, /owned|gif/, `${what}: nothing the guest wrote is relayed`);
  }
  const hanging = rig.call('POST', `/v1/machines/${B}/exec`, { ...k, body: { command: ['true'], user: 'root', timeout_ms: 1 } });
  t.equal((await exec(victim.key, A, 'during')).json?.stdout, 'during\n', 'the victim machine answers meanwhile');
  assertEnvelope(t, await hanging, 'compute_unavailable', 503);

  const ws = await open(`${served.wsBase}/v1/machines/${B}/screen`, { authorization: `Bearer ${attacker.key}` });
  await ws.waitFor(() => ws.texts.find((m) => m.type === 'status' && m.up === false && m.code === 'compute_unavailable'), 'the screen reported down');
  await ws.close();
  t.ok(gatewayLogs.some((l) => l.event === 'agent_protocol_violation' && l.machine_id === B), 'the violation is logged');
  t.equal((await exec(victim.key, A, 'after')).json?.stdout, 'after\n', 'the victim machine still answers');
  const log = await guest(B, 'cat /root/evil.log');
  t.match(log.out, /\/display\n[\s\S]*\/screen\/stream/, 'the requests did reach the guest\'s server');
});
