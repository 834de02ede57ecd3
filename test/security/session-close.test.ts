/**
 * Attack: a member closes another member's machine session (DELETE /v1/sessions/{id}), ending their work
 * and taking their input lease away. Rule: a caller closes sessions opened by its own user (the user or
 * any API key that user created); admins and owners (members:manage) close any session of the
 * organization. Browser sessions (DELETE /v1/auth/sessions/{id}) were already per user: checked too.
 */
import t from 'tap';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { assertEnvelope } from '../helpers/control-plane.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';


t.test('members close only their own sessions; admins and owners close any', async (t) => {
  const rig = await makeMachinesRig({ substrate: new FakeSubstrate(), services: { readyProbe: false } });
  t.teardown(() => rig.close());
  const owner = await rig.tenant('pro');
  const machine = (await rig.call('POST', '/v1/machines', { key: owner.key, body: { name: 'shared' } })).json.id as string;
  // Members join the owner's organization (invitation to each user's own address).
  const member = async (role: string) => {
    const u = await rig.tenant('none');
    const me = await rig.call('GET', '/v1/auth/me', { cookie: u.cookie });
    const inv = await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: me.json.user.email, role } });
    t.equal(inv.status, 201);
    const acc = await rig.call('POST', '/v1/invitations/accept', { cookie: u.cookie, body: { token: inv.json.token } });
    t.equal(acc.status, 200);
    t.equal((await rig.call('POST', '/v1/auth/switch-organization', { cookie: u.cookie, body: { organization_id: owner.orgId } })).status, 200);
    return { cookie: u.cookie, userId: u.userId, membershipId: acc.json.membership.id as string };
  };
  // Alice holds an API key made while she was an admin (members cannot make keys), then is made a member.
  const aliceAdmin = await member('admin');
  const aliceKey = await rig.key(aliceAdmin.cookie, ['machines:read', 'sessions:write']);
  t.equal((await rig.call('PATCH', `/v1/members/${aliceAdmin.membershipId}`, { cookie: owner.cookie, body: { role: 'member' } })).status, 200);
  const alice = { ...aliceAdmin, key: aliceKey.key };
  const bob = await member('member');
  const admin = await member('admin');
  const open = async (who: { key?: string; cookie?: string }) => {
    const r = await rig.call('POST', '/v1/sessions', { ...who, body: { machine_id: machine, type: 'agent' } });
    t.equal(r.status, 201);
    return r.json.id as string;
  };
  const close = (who: { key?: string; cookie?: string }, id: string) => rig.call('DELETE', `/v1/sessions/${id}`, who);
  const state = async (id: string) => (await rig.call('GET', `/v1/sessions/${id}`, { key: owner.key })).json.state;

  // Alice's session, driven with the input lease.
  const aliceSession = await open({ key: alice.key });
  t.equal((await rig.call('POST', `/v1/machines/${machine}/input-lease`, { key: owner.key, body: { session_id: aliceSession } })).status, 403, 'nobody else may use it for input either');
  // Bob (a member) cannot close it.
  assertEnvelope(t, await close({ cookie: bob.cookie }, aliceSession), 'permission_denied', 403);
  t.equal(await state(aliceSession), 'active', 'still open');
  // Alice closes a session her key opened from her browser session (same user), and her own.
  const aliceByCookie = await open({ cookie: alice.cookie });
  t.equal((await close({ key: alice.key }, aliceByCookie)).status, 204, 'her key closes her browser-opened session');
  t.equal((await close({ cookie: alice.cookie }, aliceSession)).status, 204, 'and her browser closes her key-opened one');
  // Admin and owner close anyone's.
  const bobSession = await open({ cookie: bob.cookie });
  t.equal((await close({ cookie: admin.cookie }, bobSession)).status, 204, 'an admin closes a member\'s session');
  const bobSession2 = await open({ cookie: bob.cookie });
  t.equal((await close({ cookie: owner.cookie }, bobSession2)).status, 204, 'so does an owner');
  // An admin's API key holds no members:manage (no scope grants it): only its own user's sessions.
  const adminKey = await rig.key(admin.cookie, ['sessions:write']);
  const bobSession3 = await open({ cookie: bob.cookie });
  assertEnvelope(t, await close({ key: adminKey.key }, bobSession3), 'permission_denied', 403);
  // Alice's key (her user) cannot close Bob's either; a closed session stays a no-op for its opener only.
  assertEnvelope(t, await close({ key: alice.key }, bobSession3), 'permission_denied', 403);
  t.equal((await close({ cookie: bob.cookie }, bobSession)).status, 204);
  assertEnvelope(t, await close({ key: alice.key }, bobSession), 'permission_denied', 403);
  t.equal(await state(bobSession3), 'active');

  // Browser sessions: one user's list and revocation never reach another user's.
  const bobAuth = (await rig.call('GET', '/v1/auth/sessions', { cookie: bob.cookie })).json.data[0].id as string;
  assertEnvelope(t, await rig.call('DELETE', `/v1/auth/sessions/${bobAuth}`, { cookie: alice.cookie }), 'not_found', 404);
  assertEnvelope(t, await rig.call('DELETE', `/v1/auth/sessions/${bobAuth}`, { cookie: admin.cookie }), 'not_found', 404);
  t.equal((await rig.call('GET', '/v1/auth/me', { cookie: bob.cookie })).status, 200, 'bob is still signed in');
});
