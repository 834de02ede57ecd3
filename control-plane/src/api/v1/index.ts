import { Hono } from 'hono';
import type { CpEnv } from '../../context.js';
import type { Services } from '../../services/index.js';
import { mountOp, type Op } from '../op.js';
import apiKeysCreate from './api-keys/create.js';
import apiKeysList from './api-keys/list.js';
import apiKeysRevoke from './api-keys/revoke.js';
import authListSessions from './auth/list-sessions.js';
import authLogin from './auth/login.js';
import authLogout from './auth/logout.js';
import authMe from './auth/me.js';
import authRevokeSession from './auth/revoke-session.js';
import authSignup from './auth/signup.js';
import authSwitchOrganization from './auth/switch-organization.js';
import billingCheckoutComplete from './billing/builtin-checkout-complete.js';
import billingPortalCancel from './billing/builtin-portal-cancel.js';
import billingPortalPage from './billing/builtin-portal.js';
import billingCheckout from './billing/checkout.js';
import billingGet from './billing/get.js';
import billingPortal from './billing/portal.js';
import invitationsAccept from './invitations/accept.js';
import invitationsCreate from './invitations/create.js';
import invitationsList from './invitations/list.js';
import invitationsRevoke from './invitations/revoke.js';
import membersList from './members/list.js';
import membersRemove from './members/remove.js';
import membersUpdate from './members/update.js';
import plansGet from './plans/get.js';
import plansList from './plans/list.js';

/** Every operation this issue serves; later issues append theirs (machines, snapshots, …). */
export const IDENTITY_OPS: readonly Op[] = [
  authSignup, authLogin, authLogout, authMe, authListSessions, authRevokeSession, authSwitchOrganization,
  membersList, membersUpdate, membersRemove,
  invitationsList, invitationsCreate, invitationsAccept, invitationsRevoke,
  apiKeysList, apiKeysCreate, apiKeysRevoke,
  plansList, plansGet,
  billingGet, billingCheckout, billingPortal, billingCheckoutComplete, billingPortalPage, billingPortalCancel,
];

export function v1App(s: Services, ops: readonly Op[] = IDENTITY_OPS): Hono<CpEnv> {
  const app = new Hono<CpEnv>();
  for (const op of ops) mountOp(app, s, op);
  return app;
}
