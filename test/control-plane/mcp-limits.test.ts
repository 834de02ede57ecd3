/**
 * MCP session exhaustion (issue 22 item 3), over the real app and services: one organization floods
 * /v1/mcp with initialize from many keys; it is held to its own 64 sessions and another organization still
 * connects. Revoking a key, or its creator leaving the organization, closes that key's MCP sessions at once,
 * so the organization can open new ones. The server-wide bound is lowered to 100 here so that, without the
 * per-organization cap, the flood alone would fill the server.
 */
import t from 'tap';
import { join, makeRig, subscribe, type Reply, type Rig } from '../helpers/control-plane.js';

const INITIALIZE = {
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'flood', version: '1.0.0' } },
};

function initialize(rig: Rig, key: string): Promise<Reply> {
  return rig.call('POST', '/v1/mcp', { key, body: INITIALIZE, headers: { accept: 'application/json, text/event-stream' } });
}

async function newKey(rig: Rig, cookie: string): Promise<{ id: string; secret: string }> {
  const k = await rig.call('POST', '/v1/api-keys', { cookie, body: { name: 'mcp', scopes: ['machines:read'] } });
  if (k.status !== 201) throw new Error(k.text);
  return { id: k.json.id, secret: k.json.secret };
}

/** `n` initializes with `key`: the statuses, and the session ids of those that succeeded. */
async function flood(rig: Rig, key: string, n: number): Promise<{ statuses: number[]; ids: string[]; last: Reply }> {
  const statuses: number[] = [];
  const ids: string[] = [];
  let last!: Reply;
  for (let i = 0; i < n; i++) {
    last = await initialize(rig, key);
    statuses.push(last.status);
    if (last.status === 200) ids.push(last.headers.get('mcp-session-id')!);
  }
  return { statuses, ids, last };
}

const count = (xs: number[], v: number) => xs.filter((x) => x === v).length;

t.test('MCP sessions: a cap per organization; revoked keys and departed members free theirs', async (t) => {
  const rig = await makeRig({ mcp: { maxSessions: 100 } });
  t.teardown(() => rig.close());
  const a = await rig.user('a');
  await subscribe(rig, a.cookie);
  const keys = [];
  for (let i = 0; i < 7; i++) keys.push(await newKey(rig, a.cookie));

  // The flood: 7 keys x 16 sessions each (16 per key is its own bound).
  const opened: string[][] = [];
  let refused = 0;
  for (const k of keys) {
    const f = await flood(rig, k.secret, 16);
    opened.push(f.ids);
    refused += count(f.statuses, 429);
    if (f.last.status === 429) {
      t.equal(f.last.json.error.code, 'rate_limited');
      t.equal(f.last.json.error.message, 'This organization has 64 open MCP sessions, its limit; close unused ones (DELETE /v1/mcp).');
      t.equal(f.last.headers.get('retry-after'), '60');
    }
  }
  t.equal(opened.flat().length, 64, 'the organization holds 64 sessions');
  t.equal(refused, 7 * 16 - 64, 'and every initialize beyond them was refused');
  t.same(opened.map((x) => x.length), [16, 16, 16, 16, 0, 0, 0]);

  // Another organization connects.
  const b = await rig.user('b');
  await subscribe(rig, b.cookie);
  const bKey = await newKey(rig, b.cookie);
  const bInit = await initialize(rig, bKey.secret);
  t.equal(bInit.status, 200, 'another organization still gets a session');
  t.match(bInit.headers.get('mcp-session-id'), /^[0-9a-f-]{36}$/);

  // Revoking a key closes its 16 sessions: they answer 404 to nobody, and the organization has room again.
  t.equal((await rig.call('DELETE', `/v1/api-keys/${keys[0]!.id}`, { cookie: a.cookie })).status, 204);
  const refill = await flood(rig, keys[4]!.secret, 16);
  t.equal(count(refill.statuses, 200), 16, "the revoked key's 16 sessions were freed");
  t.equal((await initialize(rig, keys[5]!.secret)).status, 429, 'and the organization is at its cap again');

  // A member leaves: the sessions of the keys they created close.
  t.equal((await rig.call('DELETE', `/v1/api-keys/${keys[1]!.id}`, { cookie: a.cookie })).status, 204);
  const m = await join(rig, a.cookie, a.orgId, 'admin');
  const mKey = await newKey(rig, m.cookie);
  t.equal(count((await flood(rig, mKey.secret, 16)).statuses, 200), 16, "the admin's key opens 16");
  t.equal((await initialize(rig, keys[5]!.secret)).status, 429, 'the organization is at its cap');
  t.equal((await rig.call('DELETE', `/v1/members/${m.membershipId}`, { cookie: m.cookie })).status, 204);
  t.equal(count((await flood(rig, keys[5]!.secret, 16)).statuses, 200), 16, "the departed member's sessions were freed");

  // A closed session is gone, for its own key too.
  const gone = await rig.call('POST', '/v1/mcp', {
    key: keys[4]!.secret,
    body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    headers: { accept: 'application/json, text/event-stream', 'mcp-session-id': opened[0]![0]!, 'mcp-protocol-version': '2025-06-18' },
  });
  t.equal(gone.status, 404, "a revoked key's session id is unknown");
});
