/**
 * The whole role × permission × scope matrix, from the spec's two tables (written out here again,
 * independently of control-plane/src/domain/rbac.ts, so a wrong table there fails this test).
 * Enforcement is asserted through the real gate pipeline: probe operations (one per permission)
 * mounted with the same mountOp/authenticate/requirePermission the real routes use, plus the real
 * routes for members:manage, api_keys:manage and billing:manage.
 */
import t from 'tap';
import { z } from 'zod';
import type { Permission } from '../../shared/schemas/org.js';
import { createApp } from '../../control-plane/src/app.js';
import { defineOp, type Op } from '../../control-plane/src/api/op.js';
import { IDENTITY_OPS } from '../../control-plane/src/api/v1/index.js';
import { makeRig, PUBLIC_ORIGIN, type Rig } from '../helpers/control-plane.js';

const Y = true;
const N = false;
// Spec, Authentication §3: Permission | owner | admin | member
const ROLE_TABLE: Record<Permission, [boolean, boolean, boolean]> = {
  'machines:create': [Y, Y, Y],
  'machines:control': [Y, Y, Y],
  'machines:delete': [Y, Y, N],
  'snapshots:write': [Y, Y, Y],
  'snapshots:delete': [Y, Y, N],
  'templates:write': [Y, Y, N],
  'ports:write': [Y, Y, Y],
  'secrets:write': [Y, Y, Y],
  'members:manage': [Y, Y, N],
  'api_keys:manage': [Y, Y, N],
  'billing:manage': [Y, N, N],
};
// Spec, Authentication §5: Scope | Grants
const SCOPE_TABLE: Record<string, string[]> = {
  'machines:read': [],
  'snapshots:read': [],
  'templates:read': [],
  'sessions:read': [],
  'usage:read': [],
  'ports:read': [],
  'machines:write': ['machines:create', 'machines:delete'],
  'machines:control': ['machines:control'],
  'snapshots:write': ['snapshots:write', 'snapshots:delete'],
  'templates:write': ['templates:write'],
  'ports:write': ['ports:write'],
  'secrets:write': ['secrets:write'],
  'sessions:write': [],
};
const ROLES = ['owner', 'admin', 'member'] as const;
const PERMS = Object.keys(ROLE_TABLE) as Permission[];
const roleHas = (role: (typeof ROLES)[number], perm: Permission) => ROLE_TABLE[perm][ROLES.indexOf(role)]!;

const probeOps: Op[] = PERMS.map((perm) =>
  defineOp({
    name: `probe.${perm}`,
    method: 'post',
    path: `/probe/${perm}`,
    auth: 'any',
    permission: perm,
    responses: { 200: z.object({ ok: z.literal(true), org: z.string().nullable() }) },
    handler: (c) => c.json({ ok: true, org: c.get('principal').org_id }),
  }),
);

/** An organization with an owner, an admin and a member, all joined through real invitations. */
async function team(rig: Rig) {
  const owner = await rig.user('owner');
  const co = await rig.call('POST', '/v1/billing/checkout', { cookie: owner.cookie, body: { plan_id: 'pro', success_url: `${PUBLIC_ORIGIN}/done` } });
  if (co.status !== 200) throw new Error(co.text);
  await rig.call('GET', new URL(co.json.url).pathname);
  const admin = await rig.user('admin');
  const member = await rig.user('member');
  for (const [u, role] of [[admin, 'admin'], [member, 'member']] as const) {
    const inv = await rig.call('POST', '/v1/invitations', { cookie: owner.cookie, body: { email: u.email, role } });
    if (inv.status !== 201) throw new Error(inv.text);
    const acc = await rig.call('POST', '/v1/invitations/accept', { cookie: u.cookie, body: { token: inv.json.token } });
    if (acc.status !== 200) throw new Error(acc.text);
    const sw = await rig.call('POST', '/v1/auth/switch-organization', { cookie: u.cookie, body: { organization_id: owner.orgId } });
    if (sw.status !== 200) throw new Error(sw.text);
  }
  return { owner, admin, member, orgId: owner.orgId };
}

t.test('role × permission and role × scope × permission', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const app = createApp({ services: rig.services, log: () => {}, ops: [...IDENTITY_OPS, ...probeOps] });
  const probe = async (perm: string, auth: { cookie?: string; key?: string }) => {
    const headers: Record<string, string> = {};
    if (auth.cookie) {
      headers.cookie = auth.cookie;
      headers.origin = PUBLIC_ORIGIN;
    }
    if (auth.key) headers.authorization = `Bearer ${auth.key}`;
    const r = await app.request(`/v1/probe/${perm}`, { method: 'POST', headers }, { clientIp: '192.0.2.9' });
    return { status: r.status, body: (await r.json()) as any };
  };
  const tm = await team(rig);
  const users = { owner: tm.owner, admin: tm.admin, member: tm.member };

  let cells = 0;
  for (const role of ROLES) {
    const me = await rig.call('GET', '/v1/auth/me', { cookie: users[role].cookie });
    t.equal(me.json.organization.id, tm.orgId);
    t.equal(me.json.organization.role, role);
    t.same(me.json.permissions, PERMS.filter((p) => roleHas(role, p)).sort(), `${role}: resolved permission list`);
    for (const perm of PERMS) {
      const r = await probe(perm, { cookie: users[role].cookie });
      if (roleHas(role, perm)) t.equal(r.status, 200, `${role} session may ${perm}`);
      else {
        t.equal(r.status, 403, `${role} session may not ${perm}`);
        t.equal(r.body.error.code, 'permission_denied');
      }
      cells++;
    }
  }

  // Keys: creators must hold api_keys:manage to mint; so the owner and the admin mint their own keys,
  // and a member's keys are minted by promoting, minting, and demoting back (the key follows the creator's role).
  const mint = async (cookie: string, scopes: string[]) => {
    const r = await rig.call('POST', '/v1/api-keys', { cookie, body: { name: 'matrix', scopes } });
    if (r.status !== 201) throw new Error(r.text);
    return r.json.secret as string;
  };
  const memberships = (await rig.call('GET', '/v1/members', { cookie: tm.owner.cookie })).json.data as any[];
  const memberMembership = memberships.find((m) => m.user_id === tm.member.userId).id;
  const setRole = (role: string) => rig.call('PATCH', `/v1/members/${memberMembership}`, { cookie: tm.owner.cookie, body: { role } });

  const keys: Record<string, Record<string, string>> = { owner: {}, admin: {}, member: {} };
  t.equal((await setRole('admin')).status, 200);
  for (const scope of Object.keys(SCOPE_TABLE)) {
    keys.owner![scope] = await mint(tm.owner.cookie, [scope]);
    keys.admin![scope] = await mint(tm.admin.cookie, [scope]);
    keys.member![scope] = await mint(tm.member.cookie, [scope]);
  }
  const allScopes = Object.keys(SCOPE_TABLE);
  const allKeys = { owner: await mint(tm.owner.cookie, allScopes), admin: await mint(tm.admin.cookie, allScopes), member: await mint(tm.member.cookie, allScopes) };
  t.equal((await setRole('member')).status, 200);

  for (const role of ROLES) {
    for (const scope of Object.keys(SCOPE_TABLE)) {
      const key = keys[role]![scope]!;
      const expected = PERMS.filter((p) => SCOPE_TABLE[scope]!.includes(p) && roleHas(role, p));
      const me = await rig.call('GET', '/v1/auth/me', { key });
      t.same(me.json.permissions, expected.sort(), `${role} key [${scope}]: resolved permissions`);
      for (const perm of PERMS) {
        const r = await probe(perm, { key });
        t.equal(r.status, expected.includes(perm) ? 200 : 403, `${role} key [${scope}] ${expected.includes(perm) ? 'may' : 'may not'} ${perm}`);
        if (r.status === 200) t.equal(r.body.org, tm.orgId, 'acts in the key organization');
        cells++;
      }
    }
    // All scopes at once: exactly the creator's permissions that some scope can grant.
    const grantable = new Set(Object.values(SCOPE_TABLE).flat());
    for (const perm of PERMS) {
      const r = await probe(perm, { key: allKeys[role] });
      t.equal(r.status, grantable.has(perm) && roleHas(role, perm) ? 200 : 403, `${role} all-scope key, ${perm}`);
    }
  }
  t.equal(cells, 3 * 11 + 3 * 13 * 11, 'every cell visited');

  // The same three permissions through the real routes they guard.
  const real = {
    'members:manage': (a: object) => rig.call('POST', '/v1/invitations', { ...a, body: { email: `x${Math.random()}@example.com`.replace('0.', ''), role: 'member' } }),
    'api_keys:manage': (a: object) => rig.call('POST', '/v1/api-keys', { ...a, body: { name: 'n', scopes: [] } }),
    'billing:manage': (a: object) => rig.call('POST', '/v1/billing/portal', { ...a, body: {} }),
  } as const;
  for (const perm of Object.keys(real) as Array<keyof typeof real>) {
    const call = real[perm];
    for (const role of ROLES) {
      const r = await call({ cookie: users[role].cookie });
      t.equal(r.status === 403, !roleHas(role, perm), `${role} session on real ${perm} route: ${r.status}`);
      const rk = await call({ key: allKeys[role] });
      t.equal(rk.status, 403, `no scope grants ${perm}: ${role} key refused`);
      t.equal(rk.json.error.code, 'permission_denied');
    }
  }
});

t.test('a key loses a permission when its creator loses it', async (t) => {
  const rig = await makeRig();
  t.teardown(() => rig.close());
  const app = createApp({ services: rig.services, log: () => {}, ops: [...IDENTITY_OPS, ...probeOps] });
  const probe = async (perm: string, key: string) =>
    (await app.request(`/v1/probe/${perm}`, { method: 'POST', headers: { authorization: `Bearer ${key}` } }, { clientIp: '192.0.2.9' })).status;
  const tm = await team(rig);
  const key = (await rig.call('POST', '/v1/api-keys', { cookie: tm.admin.cookie, body: { name: 'ci', scopes: ['machines:write', 'snapshots:write'] } })).json.secret;
  t.equal(await probe('machines:delete', key), 200, 'admin key may delete machines');
  t.equal(await probe('snapshots:delete', key), 200);
  t.equal(await probe('machines:create', key), 200);

  const members = (await rig.call('GET', '/v1/members', { cookie: tm.owner.cookie })).json.data as any[];
  const adminM = members.find((m) => m.user_id === tm.admin.userId).id;
  t.equal((await rig.call('PATCH', `/v1/members/${adminM}`, { cookie: tm.owner.cookie, body: { role: 'member' } })).status, 200);
  t.equal(await probe('machines:delete', key), 403, 'demoted creator: the key lost machines:delete');
  t.equal(await probe('snapshots:delete', key), 403);
  t.equal(await probe('machines:create', key), 200, 'still within the member role');
  t.equal(await probe('templates:write', key), 403, 'never in scope');

  t.equal((await rig.call('PATCH', `/v1/members/${adminM}`, { cookie: tm.owner.cookie, body: { role: 'admin' } })).status, 200);
  t.equal(await probe('machines:delete', key), 200, 'restored with the role');

  t.equal((await rig.call('DELETE', `/v1/members/${adminM}`, { cookie: tm.owner.cookie })).status, 204);
  const gone = await app.request('/v1/probe/machines:create', { method: 'POST', headers: { authorization: `Bearer ${key}` } }, { clientIp: '192.0.2.9' });
  t.equal(gone.status, 401, 'creator removed: the key authenticates nobody');
  t.equal(((await gone.json()) as any).error.code, 'unauthenticated');
});
