import { Hono } from 'hono';
import type { CpEnv } from '../../context.js';
import type { Services } from '../../services/index.js';
import { mountOp, type MountOptions, type Op } from '../op.js';
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
import billingStripeWebhook from './billing/stripe-webhook.js';
import billingUsageSummary from './billing/usage-summary.js';
import usageList from './usage/list.js';
import usageSeries from './usage/series.js';
import invitationsAccept from './invitations/accept.js';
import invitationsCreate from './invitations/create.js';
import invitationsList from './invitations/list.js';
import invitationsRevoke from './invitations/revoke.js';
import membersList from './members/list.js';
import membersRemove from './members/remove.js';
import membersUpdate from './members/update.js';
import plansGet from './plans/get.js';
import plansList from './plans/list.js';
import machinesBrowserOpen from './machines/browser-open.js';
import machinesClipboardGet from './machines/clipboard-get.js';
import machinesClipboardSet from './machines/clipboard-set.js';
import machinesCreate from './machines/create.js';
import machinesDelete from './machines/delete.js';
import machinesDisplayGet from './machines/display-get.js';
import machinesDisplayResize from './machines/display-resize.js';
import machinesExec from './machines/exec.js';
import machinesFilesList from './machines/files-list.js';
import machinesFilesRead from './machines/files-read.js';
import machinesFilesWrite from './machines/files-write.js';
import machinesGet from './machines/get.js';
import machinesKeyboardHotkey from './machines/keyboard-hotkey.js';
import machinesKeyboardKey from './machines/keyboard-key.js';
import machinesKeyboardType from './machines/keyboard-type.js';
import machinesList from './machines/list.js';
import machinesMouseClick from './machines/mouse-click.js';
import machinesMouseDrag from './machines/mouse-drag.js';
import machinesMouseMove from './machines/mouse-move.js';
import machinesToolsAnthropic from './machines/tools-anthropic.js';
import machinesToolsOpenai from './machines/tools-openai.js';
import machinesMouseScroll from './machines/mouse-scroll.js';
import machinesRestart from './machines/restart.js';
import machinesScreenshot from './machines/screenshot.js';
import machinesStart from './machines/start.js';
import machinesStop from './machines/stop.js';
import machinesTerminalsKill from './machines/terminals-kill.js';
import machinesTerminalsList from './machines/terminals-list.js';
import machinesTerminalsOpen from './machines/terminals-open.js';
import machinesTerminalsResize from './machines/terminals-resize.js';
import machinesUpdate from './machines/update.js';
import sessionsCreate from './sessions/create.js';
import sessionsDelete from './sessions/delete.js';
import sessionsGet from './sessions/get.js';
import sessionsList from './sessions/list.js';
import inputLeaseAcquire from './input-lease/acquire.js';
import inputLeaseGet from './input-lease/get.js';
import inputLeaseRelease from './input-lease/release.js';
import eventsList from './events/list.js';
import machinesFork from './machines/fork.js';
import machinesRestore from './machines/restore.js';
import portsGet from './ports/get.js';
import portsList from './ports/list.js';
import portsListOrg from './ports/list-org.js';
import portsPublish from './ports/publish.js';
import portsUnpublish from './ports/unpublish.js';
import snapshotsCreate from './snapshots/create.js';
import snapshotsDelete from './snapshots/delete.js';
import snapshotsGet from './snapshots/get.js';
import snapshotsList from './snapshots/list.js';
import templatesCreate from './templates/create.js';
import templatesDelete from './templates/delete.js';
import templatesGet from './templates/get.js';
import templatesList from './templates/list.js';
import secretsDelete from './secrets/delete.js';
import secretsList from './secrets/list.js';
import secretsListOrg from './secrets/list-org.js';
import secretsPut from './secrets/put.js';

/** Every operation this issue serves; later issues append theirs (machines, snapshots, …). */
export const IDENTITY_OPS: readonly Op[] = [
  authSignup, authLogin, authLogout, authMe, authListSessions, authRevokeSession, authSwitchOrganization,
  membersList, membersUpdate, membersRemove,
  invitationsList, invitationsCreate, invitationsAccept, invitationsRevoke,
  apiKeysList, apiKeysCreate, apiKeysRevoke,
  plansList, plansGet,
  billingGet, billingCheckout, billingPortal, billingCheckoutComplete, billingPortalPage, billingPortalCancel,
  billingStripeWebhook,
];

/** Machines, their agent routes, sessions, the input lease and the event log (docs/api-machines.md). */
export const MACHINE_OPS: readonly Op[] = [
  machinesBrowserOpen,
  machinesClipboardGet,
  machinesClipboardSet,
  machinesCreate,
  machinesDelete,
  machinesDisplayGet,
  machinesDisplayResize,
  machinesExec,
  machinesFilesList,
  machinesFilesRead,
  machinesFilesWrite,
  machinesGet,
  machinesKeyboardHotkey,
  machinesKeyboardKey,
  machinesKeyboardType,
  machinesList,
  machinesMouseClick,
  machinesMouseDrag,
  machinesMouseMove,
  machinesMouseScroll,
  machinesRestart,
  machinesScreenshot,
  machinesStart,
  machinesStop,
  machinesTerminalsKill,
  machinesTerminalsList,
  machinesTerminalsOpen,
  machinesTerminalsResize,
  machinesToolsAnthropic,
  machinesToolsOpenai,
  machinesUpdate,
  sessionsCreate,
  sessionsDelete,
  sessionsGet,
  sessionsList,
  inputLeaseAcquire,
  inputLeaseGet,
  inputLeaseRelease,
  eventsList,
];

/** Snapshots, templates, fork and restore (docs/api-snapshots.md). */
export const SNAPSHOT_OPS: readonly Op[] = [
  snapshotsCreate, snapshotsList, snapshotsGet, snapshotsDelete,
  templatesCreate, templatesList, templatesGet, templatesDelete,
  machinesFork, machinesRestore,
];

/** Machine secrets (docs/api-secrets.md). */
export const SECRET_OPS: readonly Op[] = [secretsPut, secretsList, secretsDelete, secretsListOrg];

/** Published ports (docs/api-ports.md); the preview hostnames themselves are served by previews/proxy.ts. */
export const PORT_OPS: readonly Op[] = [portsPublish, portsList, portsGet, portsUnpublish, portsListOrg];

/** Usage records, series and the usage summary (docs/usage-and-billing.md). */
export const USAGE_OPS: readonly Op[] = [usageList, usageSeries, billingUsageSummary];

/** Everything main.ts serves. */
export const ALL_OPS: readonly Op[] = [...IDENTITY_OPS, ...MACHINE_OPS, ...SNAPSHOT_OPS, ...SECRET_OPS, ...PORT_OPS, ...USAGE_OPS];

export function v1App(s: Services, ops: readonly Op[] = IDENTITY_OPS, opts: MountOptions = {}): Hono<CpEnv> {
  const app = new Hono<CpEnv>();
  for (const op of ops) mountOp(app, s, op, opts);
  return app;
}
