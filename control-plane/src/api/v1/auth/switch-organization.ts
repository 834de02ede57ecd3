import { SwitchOrganizationRequest } from '../../../../../shared/schemas/auth.js';
import { rolePermissions } from '../../../domain/rbac.js';
import { Me } from '../../../../../shared/schemas/responses.js';
import { defineOp } from '../../op.js';

export default defineOp({
  name: 'auth.switch_organization',
  method: 'post',
  path: '/auth/switch-organization',
  auth: 'session',
  org: false,
  body: SwitchOrganizationRequest,
  responses: { 200: Me },
  async handler(c, s, io) {
    const body = await io.body();
    const p = c.get('principal');
    const m = await s.identity.switchOrganization(p, body.organization_id);
    return c.json(await s.identity.me({ ...p, org_id: m.org_id, role: m.role, permissions: rolePermissions(m.role) }));
  },
});
