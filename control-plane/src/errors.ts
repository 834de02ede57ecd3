/**
 * Every error the control plane raises, by name (the model: supabase/storage's `ERRORS`). One factory per
 * failure holds its code, its message (clients switch on the code; tests pin the message, so it is spelled
 * here once) and, where retrying helps, its Retry-After, named by reason in `RETRY_AFTER_S`.
 * `shared/errors.ts` holds `AppError`, the codes and the envelope. Call sites say `throw ERRORS.noSuchMachine()`.
 */
import { AppError, retryAfterHeader, type ErrorCode, type FieldError, type QuotaInfo } from '../../shared/errors.js';

/** Seconds a caller should wait before retrying (the Retry-After header), by reason. */
export const RETRY_AFTER_S = {
  /** The machine's agent did not answer well; the pool redials on the next call. */
  agent: 1,
  /** A machine between two states (starting, stopping). */
  machineSettling: 2,
  /** Creating, starting, stopping, forking or restoring failed on the host. */
  machineOperation: 5,
  /** A snapshot's capture or deletion failed on the host. */
  snapshotOperation: 5,
  /** A template's build failed. */
  templateBuild: 5,
  /** The payment provider could not be reached. */
  paymentProvider: 5,
  /** The machine host is still preparing (guest image, directories). */
  hostPreparing: 5,
  /** No room for another machine of that size: room frees when someone stops or deletes a machine, no better guess than half a minute. */
  hostCapacity: 30,
  /** The host's machine disks went read-only: a read-only volume is brought back within a watch pass or two of space coming back. */
  readOnlyDisks: 30,
  /** The host is low on disk space: room frees when someone deletes data, a minute is a reasonable first retry. */
  lowDisk: 60,
  /** The disk under DATA_DIR is full. */
  outOfDisk: 60,
  /** The machine runs but its desktop (the display) is not up yet. */
  desktopStarting: 2,
  /** The machine behind a preview is not running (stopped, starting, error): docs/api-ports.md. */
  previewMachineDown: 5,
  /** The machine behind a preview runs but its agent is not reachable: docs/api-ports.md. */
  previewUnreachable: 2,
  /** Nothing answers on a preview's port yet, or the app there answered nothing usable: docs/api-ports.md. */
  previewApp: 2,
  /** A preview's open connections are at their bound (the machine's or the service's): one ends soon. */
  previewBusy: 1,
  /**
   * The control-plane process that drives the machine's host did not answer over the internal channel, or the
   * owner changed under a forwarded request: a killed owner is replaced within seconds (docs/cluster.md).
   */
  machineOwner: 2,
  /** The MCP sessions are at their limit (the organization's or the server's); idle ones are swept. */
  mcpSessions: 60,
} as const;
const retryAfter = (reason: keyof typeof RETRY_AFTER_S) => retryAfterHeader(RETRY_AFTER_S[reason]);
/** A preview's refusals for want of its secret name the scheme that would pass. */
const PREVIEW_BEARER = { 'www-authenticate': 'Bearer realm="preview"' };
const previewUnavailable = (message: string, reason: keyof typeof RETRY_AFTER_S) =>
  new AppError('compute_unavailable', message, { headers: retryAfter(reason) });

export const ERRORS = {
  needsSessionsWriteKey: () =>
    new AppError('permission_denied', 'This needs an API key with the sessions:write scope.'),
  noSuchMachine: (details?: FieldError[]) =>
    new AppError('not_found', 'No such machine.', { details }),
  machineBeingDeleted: () =>
    new AppError('conflict', 'The machine is being deleted.'),
  noSuchSession: (details?: FieldError[]) =>
    new AppError('not_found', 'No such session.', { details }),
  onlyOpenerClosesSession: () =>
    new AppError('permission_denied', 'Only the session\'s opener (or an organization admin) can close it.'),
  noSuchSessionOnMachine: (details?: FieldError[]) =>
    new AppError('not_found', 'No such session on this machine.', { details }),
  sessionClosed: () =>
    new AppError('conflict', 'The session is closed; open a new one.'),
  sessionOfAnotherCaller: () =>
    new AppError('permission_denied', 'The session was opened by another user or API key.'),
  noSuchTemplate: (details?: FieldError[]) =>
    new AppError('not_found', 'No such template.', { details }),
  templateTableRefusesCreate: () =>
    new AppError('internal_error', 'The template table does not allow a create.'),
  templateBuildFailed: (id: string | number) =>
    new AppError('compute_unavailable', `The template could not be built; template ${id} is in error (delete it and retry).`, { headers: retryAfter('templateBuild') }),
  templateBuilding: (id: string | number) =>
    new AppError('conflict', `Template ${id} is building; wait until it is ready.`),
  templateNotReady: (id: string | number, state: string | number) =>
    new AppError('conflict', `Template ${id} is ${state}; it must be ready.`),
  noSuchMember: () =>
    new AppError('not_found', 'No such member.'),
  onlyOwnerGrantsOwner: () =>
    new AppError('permission_denied', 'Only an owner may grant, change or remove the owner role.'),
  lastOwner: () =>
    new AppError('conflict', 'This member is the last owner; make someone else an owner first.'),
  removingMemberNeedsManage: () =>
    new AppError('permission_denied', 'Removing another member needs members:manage.'),
  addressIsMember: () =>
    new AppError('conflict', 'That address already belongs to a member.'),
  invitationPendingForAddress: () =>
    new AppError('conflict', 'A pending invitation for that address exists; revoke it first.'),
  noSuchInvitation: () =>
    new AppError('not_found', 'No such invitation.'),
  invitationNotPending: (state: string | number) =>
    new AppError('conflict', `The invitation is ${state}, not pending.`),
  invitationForAnotherAddress: () =>
    new AppError('permission_denied', 'This invitation was sent to a different e-mail address.'),
  alreadyMember: () =>
    new AppError('conflict', 'You are already a member of this organization.'),
  invitationChangedConcurrently: () =>
    new AppError('conflict', 'The invitation changed concurrently.'),
  noSuchApiKey: () =>
    new AppError('not_found', 'No such API key.'),
  quotaExceeded: (message: string, quota: QuotaInfo) => new AppError('quota_exceeded', message, { quota }),
  hostDisksReadOnly: () =>
    new AppError('compute_unavailable', 'The host\'s machine disks are read-only after it ran out of disk space: new machines, starts and snapshots are refused until they are recovered. Retry later.', { headers: retryAfter('readOnlyDisks') }),
  hostLowDiskSpace: () =>
    new AppError('compute_unavailable', 'The host is low on disk space: new machines, starts and snapshots are refused until space is freed. Retry later.', { headers: retryAfter('lowDisk') }),
  secretsKeyringUnavailable: (cause?: unknown) =>
    new AppError('compute_unavailable', "This server's secrets keyring is unavailable or lacks this secret's key; an operator must restore it. Nothing was changed.", { cause }),
  noSecretsKeyringToStore: () =>
    new AppError('unsupported_operation', 'This deployment has no secrets keyring (SECRETS_KEYRING=off), so secrets cannot be stored.'),
  secretsFull: (refusal: string) => new AppError('conflict', refusal),
  noSuchSecret: (details?: FieldError[]) =>
    new AppError('not_found', 'No such secret.', { details }),
  noSecretsKeyring: () =>
    new AppError('unsupported_operation', 'This deployment has no secrets keyring (SECRETS_KEYRING=off).'),
  secretTooLongToType: (max: number, details?: FieldError[]) =>
    new AppError('invalid_request', `The secret is too long to type (at most ${max} characters).`, { details }),
  machineStateConflict: (message: string) => new AppError('conflict', message),
  transitionNotAllowed: (trigger: string | number, from: string | number) =>
    new AppError('internal_error', `The transition table does not allow ${trigger} from ${from}.`),
  machineChangedState: (state: string) =>
    new AppError('conflict', `The machine changed state during the operation; it is now ${state}.`),
  machineSettling: (state: string | number) =>
    new AppError('compute_unavailable', `The machine is ${state}; retry shortly.`, { headers: retryAfter('machineSettling') }),
  mustBeRunning: (state: string | number) =>
    new AppError('conflict', `The machine is ${state}; it must be running.`),
  machineFailedStartAfterRestore: () =>
    new AppError('compute_unavailable', 'The machine failed to start after the restore.', { headers: retryAfter('machineOperation') }),
  leaseBlocksRestore: (session_id: string | number, details?: FieldError[]) =>
    new AppError('conflict', `The input lease is held by session ${session_id}; release it before restoring.`, { details }),
  diskNotCaptured: () =>
    new AppError('compute_unavailable', 'the current disk could not be captured'),
  machineNotRestored: () =>
    new AppError('compute_unavailable', 'The machine could not be restored; its disk is unchanged.', { headers: retryAfter('machineOperation') }),
  machineNotCreated: () =>
    new AppError('compute_unavailable', 'The machine could not be created.', { headers: retryAfter('machineOperation') }),
  machineFailedStart: () =>
    new AppError('compute_unavailable', 'The machine failed to start.', { headers: retryAfter('machineOperation') }),
  templateNeedsLargerSize: (id: string | number, size: string | number, details?: FieldError[]) =>
    new AppError('invalid_request', `Template ${id} needs at least size ${size}.`, { details }),
  cannotForkInState: (state: string | number) =>
    new AppError('conflict', `Cannot fork a machine that is ${state} without a snapshot_id; it must be running or stopped.`),
  /** A live fork placed on another host than its parent's, on a process that cannot move disks between hosts. */
  liveForkUnconfigured: () =>
    new AppError('compute_unavailable', "The machine's disk is on another host and cannot be copied here (disks do not move between these hosts, or the host is still preparing); retry later.", { headers: retryAfter('machineOwner') }),
  /** A live fork's capture asked of the parent's host for a fork no longer being made (services/move-acts.ts). */
  forkNotBeingMade: () =>
    new AppError('conflict', 'The fork is no longer being made, so its parent is not captured for it.'),
  machineNotForked: () =>
    new AppError('compute_unavailable', 'The machine could not be forked.', { headers: retryAfter('machineOperation') }),
  frozenWithoutCapture: () =>
    new AppError('compute_unavailable', 'the machine was frozen with no capture in flight; thawed'),
  guestFailed: (how: string, seen: string) =>
    new AppError('compute_unavailable', `the machine's guest ${how} (${seen})`),
  /** A machine whose disk the host never finished making (a crash interrupted its create). */
  machineHasNoDisk: () =>
    new AppError('conflict', 'The machine has no disk on this host: its create did not complete. Delete it and create it again.'),
  machineFailedStop: () =>
    new AppError('compute_unavailable', 'The machine failed to stop.', { headers: retryAfter('machineOperation') }),
  machineNameTaken: (name: string | number, details?: FieldError[]) =>
    new AppError('conflict', `A machine named ${name} already exists.`, { details }),
  machineNotDeleted: () =>
    new AppError('compute_unavailable', 'The machine could not be deleted; it is now in error and can be deleted again.'),
  hostFull: (size: string | number) =>
    new AppError('compute_unavailable', `This host has no room for another ${size} machine right now; retry later, or stop a running machine.`, { headers: retryAfter('hostCapacity') }),
  /** A region hint no host of the deployment has registered (domain/placement.ts). */
  unknownRegion: (region: string) =>
    new AppError('invalid_request', `No host serves region ${region}; name a region the deployment has, or omit region to place the machine anywhere.`, {
      details: [{ field: 'region', message: 'no host in this region' }],
    }),
  /** No active host (of the hinted region) has the memory, CPU and disk for the machine; never names a host. */
  noRoomToPlace: (size: string, region: string | null) =>
    new AppError('compute_unavailable', `No host${region === null ? '' : ` in region ${region}`} has the capacity (memory, CPU and disk) for another ${size} machine right now; retry later, or stop or delete a machine.`, { headers: retryAfter('hostCapacity') }),
  /** The drain's seam (services/machine-move.ts) with nothing plugged in: the drain waits and says so. */
  machineMoveNotBuilt: () =>
    new AppError('compute_unavailable', 'Moving a machine between hosts is not built yet (the layer pull between hosts); the drain waits.', { headers: retryAfter('hostCapacity') }),
  sizeAbovePlan: (largest: string, details?: FieldError[]) =>
    new AppError('invalid_request', `The plan's largest machine size is ${largest}.`, { details }),
  createNotAllowed: () =>
    new AppError('internal_error', 'The transition table does not allow creating a machine.'),
  lostByHost: () =>
    new AppError('compute_unavailable', 'lost by the host'),
  /** Starting a machine whose host was declared down (docs/operations.md, "Losing a host"): permanent until it returns. */
  machineOnLostHost: () =>
    new AppError('conflict', "The machine's host is down (host_lost) and its disk is on that host, so it cannot start there or elsewhere. When the host returns, the machine is stopped and can be started. To carry on now, create a new machine; a snapshot of this machine serves only if its layers were copied to a host that is up (by a fork or a template made from it elsewhere)."),
  /** This process's host driver lost its fence (the host was declared down, or another process drives it) mid-operation. */
  /**
   * A start of a stopped machine whose host had no room: its move to a host with room did not complete before its
   * start (services/start-elsewhere.ts); the machine is still stopped.
   */
  startMoveFailed: () =>
    new AppError('compute_unavailable', 'The machine could not be moved to a host with room to start it; it is still stopped. Retry later.', { headers: retryAfter('machineOperation') }),
  machineHostChangedHands: () =>
    new AppError('compute_unavailable', "The machine's host changed hands during the operation; nothing more was recorded. Retry.", { headers: retryAfter('machineSettling') }),
  /** The one Retry-After that is not a fixed reason: the rate limiter computes when its window frees. */
  tooManyAttempts: (retryAfterS: number) =>
    new AppError('rate_limited', `Too many attempts; retry in ${retryAfterS} seconds.`, { headers: retryAfterHeader(retryAfterS) }),
  noBillingAccount: () =>
    new AppError('not_found', 'No billing account for this organization.'),
  billingEventNotApplicable: (event: string | number, state: string | number) =>
    new AppError('conflict', `Billing event ${event} does not apply to an account in state ${state}.`),
  billingAccountChanged: () =>
    new AppError('conflict', 'The billing account changed concurrently; retry.'),
  changeInBillingPortal: (state: string | number) =>
    new AppError('conflict', `The account is ${state}; change the subscription in the billing portal.`),
  planNeedsAgreement: (id: string | number) =>
    new AppError('precondition_failed', `The ${id} plan is negotiated; it needs an agreement in effect before checkout.`),
  sessionOnAnotherMachine: (details?: FieldError[]) =>
    new AppError('invalid_request', 'The session is open on another machine.', { details }),
  viewSessionNoInput: () =>
    new AppError('permission_denied', 'A view session cannot send input; open an agent or human session.'),
  leaseNeedsRunningMachine: (state: string | number) =>
    new AppError('conflict', `The machine is ${state}; the input lease needs a running machine.`),
  leaseHeld: (message: string, details?: FieldError[]) => new AppError('conflict', message, { details }),
  leaseChangedWhileAcquiring: () =>
    new AppError('conflict', 'The input lease changed while it was being acquired; retry.'),
  leaseChangedWhileReleasing: () =>
    new AppError('conflict', 'The input lease kept changing while it was being released; retry.'),
  leaseHeldByOther: (holder: string, sessionId: string | null) =>
    new AppError('conflict', `The input lease is held by session ${holder}, not ${sessionId}.`),
  inputNeedsSessionHeader: (details?: FieldError[]) =>
    new AppError('invalid_request', 'Input needs the input lease: name your session in the X-Session-Id header.', { details }),
  badLeaseFence: (details?: FieldError[]) =>
    new AppError('invalid_request', 'X-Lease-Fence must be a non-negative integer.', { details }),
  noLeaseHolder: () =>
    new AppError('conflict', 'No session holds the input lease; acquire it first.'),
  staleFence: (fence: number | null, current: number | null) =>
    new AppError('conflict', `Stale fence ${fence}: the current input lease fence is ${current}.`),
  noSuchSnapshot: (details?: FieldError[]) =>
    new AppError('not_found', 'No such snapshot.', { details }),
  cannotCaptureInState: (state: string | number) =>
    new AppError('conflict', `Cannot capture a machine that is ${state}; it must be running or stopped.`),
  snapshotTableRefusesCapture: () =>
    new AppError('internal_error', 'The snapshot table does not allow a capture.'),
  snapshotNotReady: (id: string | number, state: string | number) =>
    new AppError('conflict', `Snapshot ${id} is ${state}; it must be ready.`),
  snapshotOfAnotherMachine: (id: string | number, machineId: string | number, details?: FieldError[]) =>
    new AppError('invalid_request', `Snapshot ${id} is not a snapshot of machine ${machineId}.`, { details }),
  captureFailed: (id: string | number) =>
    new AppError('compute_unavailable', `The capture failed; snapshot ${id} is in error (delete it and retry).`, { headers: retryAfter('snapshotOperation') }),
  newerSnapshotExists: (id: string | number, name: string | number, details?: FieldError[]) =>
    new AppError('conflict', `Snapshot ${id} ("${name}") is newer; only the newest snapshot of a machine can be deleted.`, { details }),
  snapshotBusy: (id: string | number, state: string | number) =>
    new AppError('conflict', `Snapshot ${id} is ${state}; wait until it is ready.`),
  snapshotChanged: () =>
    new AppError('conflict', 'The snapshot changed state concurrently; retry.'),
  snapshotNotDeletedYet: (id: string | number) =>
    new AppError('compute_unavailable', `Snapshot ${id} could not be deleted yet; it stays deleting; retry.`, { headers: retryAfter('snapshotOperation') }),
  noClosedPeriod: () =>
    new AppError('not_found', 'No closed period starts at that instant.'),
  noBillingPeriodYet: () =>
    new AppError('not_found', 'The account has no billing period yet: subscribe first.'),
  emailTaken: () =>
    new AppError('conflict', 'An account with this e-mail address already exists.'),
  wrongCredentials: () =>
    new AppError('unauthenticated', 'Wrong e-mail address or password.'),
  noSuchOrganization: () =>
    new AppError('not_found', 'No such organization.'),
  noPreviewDomain: () =>
    new AppError('unsupported_operation', 'This deployment serves no preview domain (PREVIEW_DOMAIN).'),
  noSuchPublishedPort: () =>
    new AppError('not_found', 'No such published port.'),
  fakeFailure: (op: string | number) =>
    new AppError('compute_unavailable', `fake ${op} failure`),
  layerNotFound: () =>
    new AppError('not_found', 'layer not found'),
  machineExistsOnSubstrate: () =>
    new AppError('conflict', 'machine exists on this substrate'),
  machineLost: () =>
    new AppError('compute_unavailable', 'machine lost'),
  stopBeforeReplacingDisk: () =>
    new AppError('conflict', 'stop the machine before replacing its disk'),
  machineNotRunning: () =>
    new AppError('compute_unavailable', 'machine is not running'),
  noSubstrateConfigured: () =>
    new AppError('compute_unavailable', 'No machine substrate is configured on this deployment.'),
  noFreeMachineNetwork: () =>
    new AppError('compute_unavailable', 'no free machine network on this host'),
  vmNetworkSetupFailed: (cause?: unknown) =>
    new AppError('compute_unavailable', 'vm network setup failed on the host', { cause }),
  vmTapSetupFailed: (cause?: unknown) =>
    new AppError('compute_unavailable', 'vm tap setup failed on the host', { cause }),
  portGuardSetupFailed: (cause?: unknown) =>
    new AppError('compute_unavailable', 'port guard setup failed on the host', { cause }),
  noFreeMachineAddress: () =>
    new AppError('compute_unavailable', 'no free machine address in the vm network'),
  diskNotFound: () =>
    new AppError('not_found', 'disk not found'),
  diskExists: () =>
    new AppError('conflict', 'disk exists'),
  runningDiskAtLayerLimit: (maxDepth: string | number) =>
    new AppError('conflict', `the running disk is at its limit of ${maxDepth} layers; stop the machine to compact it`),
  cannotCopyWritableBlob: () =>
    new AppError('unsupported_operation', 'this disk backend cannot copy a writable blob'),
  transferHeaderInvalid: (reason: string | number) =>
    new AppError('invalid_request', `layer transfer header refused: ${reason}`),
  transferTruncated: (layerId: string | number, got: string | number, announced: string | number) =>
    new AppError('invalid_request', `layer stream for ${layerId} ended after ${got} of its announced ${announced} bytes`),
  transferTrailingBytes: () =>
    new AppError('invalid_request', 'layer stream carries bytes after its last announced layer'),
  transferChecksumMismatch: (layerId: string | number) =>
    new AppError('invalid_request', `layer stream for ${layerId} does not match its announced SHA-256`),
  transferStreamRefused: (layerId: string | number, cause?: unknown) =>
    new AppError('invalid_request', `layer stream for ${layerId} could not be applied`, { cause }),
  transferNoRoom: (announced: string | number, free: string | number) =>
    new AppError('compute_unavailable', `no room for the layer transfer: ${announced} bytes announced, ${free} free`, { headers: retryAfter('lowDisk') }),
  transferOtherBase: () =>
    new AppError('conflict', 'the layer stands on a guest image this host does not have'),
  transferUnsupported: () =>
    new AppError('unsupported_operation', 'this layer store cannot move layers between hosts (no btrfs volume)'),
  qemuFailedToStart: (cause?: unknown) =>
    new AppError('compute_unavailable', 'qemu failed to start', { cause }),
  cannotThaw: () =>
    new AppError('compute_unavailable', 'this substrate cannot thaw a machine'),
  noDiskVolumeToRemount: () =>
    new AppError('compute_unavailable', 'This substrate has no disk volume to mount again.'),
  unknownMachineSize: (details?: FieldError[]) =>
    new AppError('invalid_request', 'unknown machine size', { details }),
  catalogSizeNotPositive: () =>
    new AppError('internal_error', 'catalog size has non-positive resources'),
  badMachineId: () =>
    new AppError('invalid_request', 'bad machine id'),
  machineNotOnSubstrate: () =>
    new AppError('not_found', 'machine not found on this substrate'),
  agentChannelNotReachable: (cause?: unknown) =>
    new AppError('compute_unavailable', 'agent channel not reachable', { cause }),
  podmanFailed: (command: string | undefined, cause?: unknown) =>
    new AppError('compute_unavailable', `podman ${command} failed`, { cause }),
  cannotReidentify: () =>
    new AppError('compute_unavailable', 'this substrate cannot give a running machine a new identity'),
  guestRootUnusable: () =>
    new AppError('conflict', "the machine's disk has no /etc directory to hold its identity"),
  podmanCannotRemoveBroken: () =>
    new AppError('compute_unavailable', 'podman could not remove a broken container'),
  bridgePortUnknown: () =>
    new AppError('compute_unavailable', 'could not tell the machine\'s bridge port'),
  networkSetupFailed: (cause?: unknown) =>
    new AppError('compute_unavailable', 'network setup failed on the host', { cause }),
  machineNotStopped: () =>
    new AppError('compute_unavailable', 'the machine could not be stopped'),
  containerNotFrozen: () =>
    new AppError('compute_unavailable', 'container did not freeze'),
  podmanCannotUnpause: () =>
    new AppError('compute_unavailable', 'podman could not unpause the machine'),
  diskVolumeNotRemountable: () =>
    new AppError('compute_unavailable', 'the disk volume is not a loop volume this host can mount again'),
  noSuchPlan: () =>
    new AppError('not_found', 'No such plan.'),
  builtinBillingNotInUse: () =>
    new AppError('unsupported_operation', 'The built-in billing provider is not in use.'),
  unknownPortalLink: () =>
    new AppError('not_found', 'This portal link is unknown or expired.'),
  unknownCheckoutLink: () =>
    new AppError('not_found', 'This checkout link is unknown, expired or already used.'),
  stripeBillingNotInUse: () =>
    new AppError('unsupported_operation', 'The Stripe billing provider is not in use.'),
  noSuchRoute: () =>
    new AppError('not_found', 'No such route.'),
  badApiKey: () =>
    new AppError('unauthenticated', 'Missing or invalid API key.'),
  signInOrSendKey: () =>
    new AppError('unauthenticated', 'Sign in or send an API key.'),
  cookieWriteNeedsOrigin: () =>
    new AppError('permission_denied', 'Cookie-authenticated writes need a recognised Origin header.'),
  needsBrowserSession: () =>
    new AppError('permission_denied', 'This route needs a signed-in browser session, not an API key.'),
  /**
   * A request carrying two session cookies: one was set from another site sharing a parent domain (cookie
   * tossing, docs/security.md). Neither is taken; signing out and in again replaces the API's own.
   */
  twoSessionCookies: () =>
    new AppError('unauthenticated', 'This request carries more than one session cookie, so neither is used: a site under a parent domain of this one may have set one. Clear this site\'s cookies and sign in again.'),
  noOrganization: () =>
    new AppError('permission_denied', 'You are not a member of any organization.'),
  needsPermission: (perm: string | number) =>
    new AppError('permission_denied', `This needs the ${perm} permission.`),
  foreignOrigin: () =>
    new AppError('permission_denied', 'Requests from this Origin are not accepted.'),
  bodyTooLarge: () =>
    new AppError('invalid_request', 'Request body is too large.'),
  serverOutOfDisk: () =>
    new AppError('compute_unavailable', 'The server is out of disk space; retry later.', { headers: retryAfter('outOfDisk') }),
  controlPlaneFailed: () =>
    new AppError('internal_error', 'The control plane failed to handle the request.'),
  undeclaredStatus: (name: string | number, status: string | number) =>
    new AppError('internal_error', `${name} answered undeclared status ${status}`),
  responseSchemaMismatch: (name: string, status: number, issues: string) =>
    new AppError('internal_error', `${name} ${status} does not match its schema: ${issues}`),
  agentUnreachable: (message: string, cause?: unknown) => new AppError('compute_unavailable', message, { headers: retryAfter('agent'), cause }),
  /** What a caller of the machine's agent gets for an answer that is not one. */
  malformedAgentAnswer: (what: string | number) =>
    new AppError('compute_unavailable', `The machine agent sent ${what}; the machine may be misbehaving.`, { headers: retryAfter('agent') }),
  agentCannotServe: () =>
    new AppError('compute_unavailable', 'The machine agent could not serve the request.', { headers: retryAfter('agent') }),
  agentRefused: (e: { code: ErrorCode; message: string; details: FieldError[] }) =>
    new AppError(e.code, e.message || 'The machine agent refused the request.', {
      details: e.details,
      headers: e.code === 'compute_unavailable' ? retryAfter('agent') : {},
    }),
  paymentProviderUnreachable: () =>
    new AppError('compute_unavailable', 'The payment provider could not be reached; retry shortly.', { headers: retryAfter('paymentProvider') }),
  noCheckoutPage: () =>
    new AppError('compute_unavailable', 'The payment provider returned no checkout page; retry shortly.', { headers: retryAfter('paymentProvider') }),
  noSubscriptionYet: () =>
    new AppError('precondition_failed', 'There is no subscription to manage yet: check out first.'),
  bodyOverLimit: (limit: string | number) =>
    new AppError('invalid_request', `Request body exceeds ${limit} bytes.`),
  hostPrepareFailed: () =>
    new AppError('compute_unavailable', 'The machine host failed to prepare (its guest image or its directories); see the server log.'),
  hostPreparing: () =>
    new AppError('compute_unavailable', 'The machine host is still preparing; retry shortly.', { headers: retryAfter('hostPreparing') }),
  /**
   * An error as a caller may see it when the request held a secret: its code and headers, a fixed `message`
   * and no details, so not even a hostile guest can echo the value back.
   */
  redacted: (e: unknown, message: string) =>
    e instanceof AppError ? new AppError(e.code, message, { headers: e.headers }) : new AppError('compute_unavailable', message),
  desktopNotUp: () =>
    new AppError('compute_unavailable', 'The desktop is not up yet; retry shortly.', { headers: retryAfter('desktopStarting') }),
  /** A path parameter of an agent route (`term_id` → "terminal") that is not well formed: not found. */
  noSuchPathItem: (what: string) =>
    new AppError('not_found', `No such ${what}.`),
  noSuchChannel: () =>
    new AppError('not_found', 'No such channel.'),
  noSuchTerminal: () =>
    new AppError('not_found', 'No such terminal.'),
  cookieChannelNeedsOrigin: () =>
    new AppError('permission_denied', 'Cookie-authenticated channels need a recognised Origin header.'),
  serverShuttingDown: () =>
    new AppError('compute_unavailable', 'The server is shutting down.'),
  channelNotOpened: () =>
    new AppError('internal_error', 'The channel could not be opened.'),
  /** The agent refused the screen stream: its own message when it sent one. */
  screenStreamRefused: (agentMessage: string) =>
    new AppError('compute_unavailable', agentMessage || 'The desktop is not up yet.'),
  screenStreamEnded: () =>
    new AppError('compute_unavailable', 'The screen stream ended.'),
  inputNotApplied: () =>
    new AppError('compute_unavailable', 'The machine could not apply the input.'),
  noSuchPreview: () =>
    new AppError('not_found', 'This preview does not exist or was unpublished.'),
  previewPrivate: () =>
    new AppError('unauthenticated', "This preview is private. Open its access link, or send the preview's secret as Authorization: Bearer.", { headers: PREVIEW_BEARER }),
  previewAccessLinkInvalid: () =>
    new AppError('unauthenticated', "This access link was already used or is not valid. Programs can send the preview's secret as Authorization: Bearer.", { headers: PREVIEW_BEARER }),
  previewMachineNotRunning: () =>
    previewUnavailable('The machine behind this preview is not running.', 'previewMachineDown'),
  previewMachineUnreachable: () =>
    previewUnavailable('The machine behind this preview is not reachable right now.', 'previewUnreachable'),
  previewNothingListening: () =>
    previewUnavailable("Nothing is answering on this preview's port inside the machine yet.", 'previewApp'),
  previewNoAnswer: () =>
    previewUnavailable('The app inside the machine closed the connection or did not answer in time.', 'previewApp'),
  previewMachineBusy: () =>
    previewUnavailable('This preview has too many open connections right now; try again in a moment.', 'previewBusy'),
  previewBudgetBusy: () =>
    previewUnavailable('The service has too many open preview connections right now; try again in a moment.', 'previewBusy'),
  previewFailed: () =>
    new AppError('internal_error', 'The preview failed.'),
  mcpOrgSessionLimit: (maxPerOrg: number) =>
    new AppError('rate_limited', `This organization has ${maxPerOrg} open MCP sessions, its limit; close unused ones (DELETE /v1/mcp).`, { headers: retryAfter('mcpSessions') }),
  mcpServerSessionLimit: () =>
    new AppError('rate_limited', 'Too many open MCP sessions on this server; close unused ones (DELETE /v1/mcp).', { headers: retryAfter('mcpSessions') }),
  mcpNeedsApiKey: () =>
    new AppError('unauthenticated', 'The MCP endpoint needs an API key: Authorization: Bearer sk_…'),
  noSuchMcpSession: () =>
    new AppError('not_found', 'No such MCP session; initialize a new one.'),
  mcpSessionIdRequired: () =>
    new AppError('invalid_request', 'Mcp-Session-Id header required.'),
  /** The MCP transport's HTTP-level refusal: its JSON-RPC message (sanitized by the caller) or its status. */
  mcpTransportRefused: (code: ErrorCode, message: string, status: number) =>
    new AppError(code, message || `The MCP transport refused the request (HTTP ${status}).`),
  mcpNoServerStream: () =>
    new AppError('unsupported_operation', 'This MCP server offers no server-initiated stream (GET); send requests with POST.'),
  /** A computer-use tool request naming one of the display's two declared sizes without the other. */
  displaySizeHalfGiven: (width: string, height: string, missing: string) =>
    new AppError('invalid_request', `Give both ${width} and ${height}, or neither.`, { details: [{ field: missing, message: 'required with the other' }] }),
  outsideDisplay: (x: number, y: number, width: number, height: number, field: string) =>
    new AppError('invalid_request', `(${x}, ${y}) is outside the ${width}x${height} display.`, { details: [{ field, message: 'outside the display' }] }),
  /** The caller's Host (or its forwarded address) cannot be carried to the machine's owner: not a host name. */
  callerNotForwardable: () =>
    new AppError('invalid_request', 'The Host header is not a host name.', { details: [{ field: 'host', message: 'not a host name' }] }),
  /** Any request on the internal channel that is not signed for this process, now, once: no detail, ever. */
  forwardNotSigned: () =>
    new AppError('unauthenticated', 'Unauthenticated.'),
  /** The process serving the machine's host could not be reached (no host address or id is ever named). */
  machineOwnerUnreachable: () =>
    new AppError('compute_unavailable', "The machine's host is not reachable right now; retry shortly.", { headers: retryAfter('machineOwner') }),
  /** A forwarded request reached a process that no longer serves the machine's host: never forwarded a second time. */
  machineOwnerMoved: () =>
    new AppError('compute_unavailable', "The machine's host changed while the request was on its way; retry.", { headers: retryAfter('machineOwner') }),
  /** A snapshot's or template's layers are on a host that is down (or no longer registered): nothing can move them. */
  layerOnLostHost: () =>
    new AppError('conflict', "The snapshot's disk is on a host that is down (host_lost), so it cannot be copied here. When that host returns it can be used again; a copy already made on another host (by a fork or template there) serves meanwhile."),
  /** The host a snapshot's or template's layers were recorded on answers that it does not hold them (any more). */
  layerGoneFromHost: () =>
    new AppError('conflict', "The snapshot's disk is no longer on the host that held it, so it cannot be copied here."),
  /** A layer held on another host, and this process has no way to move it (no internal channel configured). */
  layerTransferUnconfigured: () =>
    new AppError('compute_unavailable', "The snapshot's disk is on another host and cannot be copied here (layers do not move between these hosts, or the host is still preparing); retry later.", { headers: retryAfter('machineOwner') }),
  /** A layer route's query that is not `have=<layer ids>` (internal-layers.ts). */
  layerHaveInvalid: (max: number) =>
    new AppError('invalid_request', 'The layer request\'s query is not a list of layer ids.', { details: [{ field: 'have', message: `at most ${max} comma-separated layer ids` }] }),
  /** A host-to-host call (cluster/forward/host-call.ts) to a route the receiving process does not serve. */
  noSuchHostCall: () =>
    new AppError('not_found', 'No such internal route.'),
  /** A host-to-host call's JSON body over the channel's bound (host-call.ts `postJson`): a bug of the caller's. */
  hostCallBodyTooLarge: (max: number) =>
    new AppError('invalid_request', `A host-to-host call's body is larger than ${max} bytes.`),
  /** A move route's body that is not JSON (internal-moves.ts); a body that is, but not the route's shape, is parseOrThrow's. */
  moveBodyNotJson: () =>
    new AppError('invalid_request', "The move step's body is not JSON of at most 16 KiB."),
  /** A move step asked of a host about a machine the store does not hold (deleted meanwhile, or never one). */
  moveNoSuchMachine: () =>
    new AppError('not_found', 'No such machine to move.'),
  /** A source step (stop, capture) asked of a host the machine is not recorded on. */
  moveNotOnThisHost: () =>
    new AppError('conflict', 'The machine is not on this host, so this host cannot stop or capture it for a move.'),
  /** A target step (pull, make disk, start) asked of a host before the move put the machine's disk there. */
  moveNoDiskHere: () =>
    new AppError('conflict', "The machine's disk is not made on this host yet, so it cannot start here."),
  /** The drain's move cannot run: this process has no internal channel or no layer transfer (cluster/machine-move.ts). */
  machineMoveUnconfigured: (what: string) =>
    new AppError('compute_unavailable', `Moving a machine between hosts is not configured here (${what}); the drain waits.`, { headers: retryAfter('hostCapacity') }),
  /** The started guest's agent did not answer within the boot's readiness bound (internal-moves.ts `start`). */
  moveAgentSilent: () =>
    new AppError('compute_unavailable', "The moved machine started, but its agent did not answer in time; the drain tries the start again.", { headers: retryAfter('hostCapacity') }),
  /** A host-to-host call whose target could not be reached, or broke off before its answer ended. */
  hostCallUnreachable: () =>
    new AppError('compute_unavailable', 'Another host of the deployment is not reachable right now; retry shortly.', { headers: retryAfter('machineOwner') }),
  /** A host-to-host call the other process refused: its answer's code and message (a process of this deployment wrote them). */
  hostCallRefused: (code: ErrorCode, message: string) =>
    new AppError(code, message),
  /** A host-to-host call answered with something that is not this channel's envelope. */
  hostCallGarbled: (status: number) =>
    new AppError('compute_unavailable', `Another host of the deployment answered ${status} without an error envelope; retry shortly.`, { headers: retryAfter('machineOwner') }),
  pointerUnknown: () =>
    new AppError('compute_unavailable', 'The pointer position is unknown.'),
};
