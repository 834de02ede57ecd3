import t from 'tap';
import { assertEnvelope, join, makeRig, subscribe } from '../helpers/control-plane.js';

t.test('members: roles, owner-only owner changes, last-owner protection', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const owner = await rig.user('owner');
  await subscribe(rig, owner.cookie);
  const admin = await join(rig, owner.cookie, owner.orgId, 'admin');
  const member = await join(rig, owner.cookie, owner.orgId, 'member');

  const list = await rig.call('GET', '/v1/members', { cookie: member.cookie });
  t.equal(list.status, 200, 'reads need only membership');
  t.equal(list.json.data.length, 3);
  const ownerM = list.json.data.find((m: any) => m.user_id === owner.userId);
  t.same(Object.keys(ownerM).sort(), ['created_at', 'email', 'id', 'name', 'role', 'user_id']);
  t.equal(ownerM.role, 'owner');

  // Last owner cannot be demoted or removed, even by themselves.
  assertEnvelope(t, await rig.call('PATCH', `/v1/members/${ownerM.id}`, { cookie: owner.cookie, body: { role: 'admin' } }), 'conflict', 409);
  assertEnvelope(t, await rig.call('DELETE', `/v1/members/${ownerM.id}`, { cookie: owner.cookie }), 'conflict', 409);
  // An admin cannot touch the owner role at all.
  assertEnvelope(t, await rig.call('PATCH', `/v1/members/${admin.membershipId}`, { cookie: admin.cookie, body: { role: 'owner' } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('PATCH', `/v1/members/${ownerM.id}`, { cookie: admin.cookie, body: { role: 'member' } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('DELETE', `/v1/members/${ownerM.id}`, { cookie: admin.cookie }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', '/v1/invitations', { cookie: admin.cookie, body: { email: 'o2@example.com', role: 'owner' } }), 'permission_denied', 403);
  // A member cannot change roles or remove others.
  assertEnvelope(t, await rig.call('PATCH', `/v1/members/${admin.membershipId}`, { cookie: member.cookie, body: { role: 'member' } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('DELETE', `/v1/members/${admin.membershipId}`, { cookie: member.cookie }), 'permission_denied', 403);
  // The admin may change the member's role.
  const up = await rig.call('PATCH', `/v1/members/${member.membershipId}`, { cookie: admin.cookie, body: { role: 'admin' } });
  t.equal(up.status, 200);
  t.equal(up.json.role, 'admin');
  t.equal((await rig.call('PATCH', `/v1/members/${member.membershipId}`, { cookie: admin.cookie, body: { role: 'member' } })).json.role, 'member');

  // A second owner makes the first removable; the organization still never ends with none.
  t.equal((await rig.call('PATCH', `/v1/members/${admin.membershipId}`, { cookie: owner.cookie, body: { role: 'owner' } })).status, 200);
  t.equal((await rig.call('PATCH', `/v1/members/${ownerM.id}`, { cookie: admin.cookie, body: { role: 'member' } })).status, 200, 'new owner demotes the old');
  assertEnvelope(t, await rig.call('PATCH', `/v1/members/${admin.membershipId}`, { cookie: admin.cookie, body: { role: 'admin' } }), 'conflict', 409);
  const owners = (await rig.call('GET', '/v1/members', { cookie: admin.cookie })).json.data.filter((m: any) => m.role === 'owner');
  t.equal(owners.length, 1);

  // A member may leave on their own.
  t.equal((await rig.call('DELETE', `/v1/members/${member.membershipId}`, { cookie: member.cookie })).status, 204);
  const me = await rig.call('GET', '/v1/auth/me', { cookie: member.cookie });
  t.equal(me.json.organization.id, member.orgId, 'falls back to the personal organization');
  t.equal((await rig.call('GET', '/v1/members', { cookie: admin.cookie })).json.data.length, 2);
  assertEnvelope(t, await rig.call('DELETE', `/v1/members/${member.membershipId}`, { cookie: admin.cookie }), 'not_found', 404);
});

t.test('invitations: pending, accepted, revoked, expired', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const owner = await rig.user('owner');

  // An unsubscribed account grants nothing, not even seats.
  const refused = await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: 'x@example.com', role: 'member' } });
  assertEnvelope(t, refused, 'quota_exceeded', 402);
  t.equal(refused.json.error.quota.limit, 'subscription');
  await subscribe(rig, owner.cookie);

  const invitee = await rig.user('invitee');
  const inv = await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: invitee.email.toUpperCase(), role: 'admin' } });
  t.equal(inv.status, 201);
  t.equal(inv.json.state, 'pending');
  t.equal(inv.json.email, invitee.email);
  t.equal(inv.json.role, 'admin');
  t.match(inv.json.token, /^[0-9A-Za-z]{43}$/);
  t.equal(Date.parse(inv.json.expires_at) - Date.parse(inv.json.created_at), 7 * 24 * 3600 * 1000);
  const listed = await rig.call('GET', '/v1/invitations', { cookie: owner.cookie });
  t.equal(listed.json.data.length, 1);
  t.notOk('token' in listed.json.data[0], 'token only in the creating response');
  assertEnvelope(t, await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: invitee.email, role: 'member' } }), 'conflict', 409);

  // Only the addressee may accept.
  const stranger = await rig.user('stranger');
  assertEnvelope(t, await rig.call('POST', '/v1/invitations/accept', { cookie: stranger.cookie, body: { token: inv.json.token } }), 'permission_denied', 403);
  assertEnvelope(t, await rig.call('POST', '/v1/invitations/accept', { cookie: invitee.cookie, body: { token: 'A'.repeat(43) } }), 'not_found', 404);
  await subscribe(rig, invitee.cookie);
  const key = (await rig.call('POST', '/v1/api-keys', { cookie: invitee.cookie, body: { name: 'k', scopes: [] } })).json.secret;
  assertEnvelope(t, await rig.call('POST', '/v1/invitations/accept', { key, body: { token: inv.json.token } }), 'permission_denied', 403);
  const acc = await rig.call('POST', '/v1/invitations/accept', { cookie: invitee.cookie, body: { token: inv.json.token } });
  t.equal(acc.status, 200);
  t.equal(acc.json.organization.id, owner.orgId);
  t.equal(acc.json.membership.role, 'admin');
  const accepted = (await rig.call('GET', '/v1/invitations', { cookie: owner.cookie })).json.data[0];
  t.equal(accepted.state, 'accepted');
  t.type(accepted.accepted_at, 'string');
  assertEnvelope(t, await rig.call('POST', '/v1/invitations/accept', { cookie: invitee.cookie, body: { token: inv.json.token } }), 'conflict', 409);
  assertEnvelope(t, await rig.call('DELETE', `/v1/invitations/${inv.json.id}`, { cookie: owner.cookie }), 'conflict', 409);
  assertEnvelope(t, await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: invitee.email, role: 'member' } }), 'conflict', 409);

  // Revoked.
  const r2 = await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: stranger.email, role: 'member' } });
  const rev = await rig.call('DELETE', `/v1/invitations/${r2.json.id}`, { cookie: owner.cookie });
  t.equal(rev.status, 200);
  t.equal(rev.json.state, 'revoked');
  t.type(rev.json.revoked_at, 'string');
  assertEnvelope(t, await rig.call('POST', '/v1/invitations/accept', { cookie: stranger.cookie, body: { token: r2.json.token } }), 'conflict', 409);
  assertEnvelope(t, await rig.call('DELETE', `/v1/invitations/${r2.json.id}`, { cookie: owner.cookie }), 'conflict', 409);

  // Expired after seven days.
  const late = await rig.user('late');
  const r3 = await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: late.email, role: 'member' } });
  rig.clock.t += 7 * 24 * 3600 * 1000;
  const exp = await rig.call('POST', '/v1/invitations/accept', { cookie: late.cookie, body: { token: r3.json.token } });
  assertEnvelope(t, exp, 'conflict', 409);
  t.match(exp.json.error.message, /expired/);
  const states = Object.fromEntries((await rig.call('GET', '/v1/invitations', { cookie: owner.cookie })).json.data.map((i: any) => [i.id, i.state]));
  t.same(states, { [inv.json.id]: 'accepted', [r2.json.id]: 'revoked', [r3.json.id]: 'expired' });
  // A new invitation for the same address is allowed once the old one is no longer pending.
  t.equal((await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: late.email, role: 'member' } })).status, 201);
});

t.test('members quota counts pending invitations', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const owner = await rig.user('owner');
  await subscribe(rig, owner.cookie, 'developer'); // 5 members
  for (let i = 0; i < 4; i++) t.equal((await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: `m${i}@example.com`, role: 'member' } })).status, 201);
  const over = await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: 'm4@example.com', role: 'member' } });
  assertEnvelope(t, over, 'quota_exceeded', 402);
  t.same(over.json.error.quota, { limit: 'members', current: 5, maximum: 5, plan_id: 'developer', upgrade_url: null });
  t.same(over.json.error.details, []);
});

t.test('cross-organization isolation on every route', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const a = await rig.user('a');
  const b = await rig.user('b');
  await subscribe(rig, a.cookie);
  await subscribe(rig, b.cookie);
  const bKey = await rig.call('POST', '/v1/api-keys', { cookie: b.cookie, body: { name: 'b', scopes: ['machines:write'] } });
  const bInv = await rig.call('POST', '/v1/invitations', { cookie: b.cookie, body: { email: 'someone@example.com', role: 'member' } });
  const bMembers = await rig.call('GET', '/v1/members', { cookie: b.cookie });
  const bMember = bMembers.json.data[0].id;
  const bSession = (await rig.call('GET', '/v1/auth/sessions', { cookie: b.cookie })).json.data[0].id;
  const aKey = (await rig.call('POST', '/v1/api-keys', { cookie: a.cookie, body: { name: 'a', scopes: [] } })).json.secret;

  for (const auth of [{ cookie: a.cookie }, { key: aKey }]) {
    const kind = auth.cookie ? 'session' : 'key';
    // Lists only ever show the caller's organization.
    const members = await rig.call('GET', '/v1/members', auth);
    t.same(members.json.data.map((m: any) => m.user_id), [a.userId], `${kind}: members list is a's`);
    t.equal((await rig.call('GET', '/v1/invitations', auth)).json.data.length, 0);
    t.notOk((await rig.call('GET', '/v1/api-keys', auth)).json.data.some((k: any) => k.id === bKey.json.id));
    t.equal((await rig.call('GET', '/v1/billing', auth)).json.organization_id, a.orgId);
  }
  // Every route naming a resource of b answers not_found to a (owner, so never a permission issue).
  const probes: [string, string, object?][] = [
    ['PATCH', `/v1/members/${bMember}`, { role: 'member' }],
    ['DELETE', `/v1/members/${bMember}`],
    ['DELETE', `/v1/invitations/${bInv.json.id}`],
    ['DELETE', `/v1/api-keys/${bKey.json.id}`],
    ['DELETE', `/v1/auth/sessions/${bSession}`],
    ['POST', '/v1/auth/switch-organization', { organization_id: b.orgId }],
  ];
  for (const [m, p, body] of probes) assertEnvelope(t, await rig.call(m, p, { cookie: a.cookie, body }), 'not_found', 404);
  // b's things are intact.
  t.equal((await rig.call('GET', '/v1/members', { cookie: b.cookie })).json.data[0].role, 'owner');
  t.equal((await rig.call('GET', '/v1/invitations', { cookie: b.cookie })).json.data[0].state, 'pending');
  t.equal((await rig.call('GET', '/v1/auth/me', { key: bKey.json.secret })).status, 200);
  t.equal((await rig.call('GET', '/v1/auth/sessions', { cookie: b.cookie })).json.data.length, 1);
  // b's key acts only in b.
  t.equal((await rig.call('GET', '/v1/members', { key: bKey.json.secret })).json.data[0].user_id, b.userId);
  // Billing links of b do not open a's account (tokens are per account, one-time).
  const portal = await rig.call('POST', '/v1/billing/portal', { cookie: b.cookie, body: {} });
  const page = await rig.call('GET', new URL(portal.json.url).pathname);
  t.equal(page.status, 200);
  t.notOk(page.text.includes(a.orgId));
});
