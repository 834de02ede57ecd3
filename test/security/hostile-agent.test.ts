/**
 * Attack: a tenant's guest root replaces the machine agent with its own HTTP/2 server on the channel
 * and answers the control plane with malformed, oversize, never-ending or lying answers, and hostile
 * screen framing. Every API answer must be a clean 503 compute_unavailable envelope (never a 500, a
 * relayed lie or a hang), and another tenant's machine keeps working meanwhile.
 */
import t from 'tap';
import type { LogLine } from '../../control-plane/src/log.js';
import { assertEnvelope } from '../helpers/control-plane.js';
import { open } from '../helpers/gateway-ws.js';
import { startHostileAgent } from '../helpers/hostile-agent.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';

t.test('a replaced agent cannot hang, crash or lie through the control plane', async (t) => {
  const hostile = await startHostileAgent();
  const replaced = new Map<string, (guestEnd: import('node:stream').Duplex) => void>();
  const fake = fakeSubstrateWithAgents({ replaced });
  const rig = await makeMachinesRig({
    substrate: fake.substrate,
    services: { readyProbe: false, agentTimeouts: { connectMs: 1000, requestMs: 1500 }, agentMaxAnswerBytes: 1024 * 1024 },
  });
  const gatewayLogs: LogLine[] = [];
  const served = await serveWithGateway(rig, { deps: { log: (l) => gatewayLogs.push(l), agentTimeoutMs: 1500 }, gateway: { screen: { retryMs: 60_000 } } });
  t.teardown(async () => {
    await served.close();
    await rig.close();
    fake.close();
    await hostile.close();
  });

  const victim = await rig.tenant('pro');
  const attacker = await rig.tenant('pro');
  const good = await rig.call('POST', '/v1/machines', { key: victim.key, body: { name: 'good' } });
  const bad = await rig.call('POST', '/v1/machines', { key: attacker.key, body: { name: 'bad' } });
  t.equal(good.status, 201);
  t.equal(bad.status, 201);
  const A = good.json.id as string;
  const B = bad.json.id as string;
  // Guest root of B kills the agent and serves the channel itself.
  replaced.set(B, (end) => hostile.connect(end));

  const victimExec = async (word: string) => {
    const r = await rig.call('POST', `/v1/machines/${A}/exec`, { key: victim.key, body: { command: ['echo', word], user: 'root' } });
    t.equal(r.status, 200, `the other machine answers (${word})`);
    t.equal(r.json?.stdout, `${word}\n`);
  };
  await victimExec('before');

  hostile.plan = new Map([
    ['/display', 'not_json'],
    ['/screenshot', 'wrong_shape'],
    ['/clipboard', 'oversize'],
    ['/files', 'trickle'],
    ['/exec', 'silent'],
    ['/terminals', 'fake_quota'],
    ['/terminals/term_x/resize', 'html_500'],
    ['/screen/stream', 'screen_negative'],
  ]);
  hostile.plan.set('/files/content', 'status_mismatch');
  const k = { key: attacker.key };
  const cases: Array<[string, string, string, unknown?]> = [
    ['not JSON', 'GET', `/v1/machines/${B}/display`],
    ['wrong shape', 'GET', `/v1/machines/${B}/screenshot`],
    ['oversize body', 'GET', `/v1/machines/${B}/clipboard`],
    ['402 quota_exceeded from the guest', 'GET', `/v1/machines/${B}/terminals`],
    ['status and code disagree', 'GET', `/v1/machines/${B}/files/content?path=%2Fetc%2Fhostname`],
    ['500 with a non-envelope body', 'POST', `/v1/machines/${B}/terminals/term_x/resize`, { cols: 80, rows: 24 }],
  ];
  for (const [what, method, p, body] of cases) {
    const r = await rig.call(method, p, { ...k, body });
    assertEnvelope(t, r, 'compute_unavailable', 503);
    t.notMatch(r.text, /owned|pay the guest|root\/secret|confused|wide/, `${what}: nothing the guest wrote is relayed`);
    t.comment(`${what}: ${r.status} ${r.json?.error?.message} ${JSON.stringify(r.json?.error?.details)}`);
  }

  // Never-ending answers: each ends at the deadline with 503 while the victim's machine answers at once.
  const hanging = Promise.all([
    rig.call('GET', `/v1/machines/${B}/files?path=%2Ftmp`, k),
    rig.call('POST', `/v1/machines/${B}/exec`, { ...k, body: { command: ['true'], user: 'root', timeout_ms: 1 } }),
  ]);
  await victimExec('during');
  for (const r of await hanging) assertEnvelope(t, r, 'compute_unavailable', 503);
  t.ok(hostile.seen.includes('/files') && hostile.seen.includes('/exec'), 'the requests did reach the hostile agent');

  // Screen framing with a negative length: the viewer is told the desktop is down; the service lives on.
  const ws = await open(`${served.wsBase}/v1/machines/${B}/screen`, { authorization: `Bearer ${attacker.key}` });
  await ws.waitFor(() => ws.texts.find((m) => m.type === 'status' && m.up === false && m.code === 'compute_unavailable'), 'the screen reported down');
  t.ok(gatewayLogs.some((l) => l.event === 'agent_protocol_violation' && l.machine_id === B), 'the violation is logged for the operator');
  await ws.close();
  hostile.plan.set('/screen/stream', 'screen_nan');
  const ws2 = await open(`${served.wsBase}/v1/machines/${B}/screen?fps=5`, { authorization: `Bearer ${attacker.key}` });
  await ws2.waitFor(() => ws2.texts.find((m) => m.type === 'status' && m.up === false && m.code === 'compute_unavailable'), 'the screen reported down (NaN)');
  await ws2.close();
  await victimExec('after');
  t.notOk(rig.bodies.some((b) => /owned|pay the guest|root\/secret/.test(b)), 'no guest bytes reached any API answer');
});
