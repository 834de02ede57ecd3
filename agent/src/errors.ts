/**
 * Every error the guest agent raises, by name (the model: supabase/storage's `ERRORS`; the control plane
 * keeps its own in `control-plane/src/errors.ts`). The agent is its own program inside the guest, with its
 * own failures (paths, terminals, the display); the two share only the vocabulary in `shared/errors.ts`.
 * One factory per failure holds its code, its message and, where retrying helps, its Retry-After.
 */
import { AppError, retryAfterHeader, type ErrorCode, type FieldError } from '../../shared/errors.js';

/** Seconds a caller should wait before retrying (the Retry-After header), by reason. */
export const RETRY_AFTER_S = {
  /** The display (or the desktop on it) is still coming up after the machine started. */
  displayStarting: 1,
  /** Every TCP stream slot is taken; one frees when a connection closes. */
  tcpStreams: 1,
} as const;
const retryAfter = (reason: keyof typeof RETRY_AFTER_S) => retryAfterHeader(RETRY_AFTER_S[reason]);

export const ERRORS = {
  commandNotStarted: (cause?: unknown) =>
    new AppError('internal_error', 'Could not start the command.', { cause }),
  badScreenshotView: (details?: FieldError[]) =>
    new AppError('invalid_request', 'The screenshot view cannot be produced.', { details }),
  displayNotReady: () =>
    new AppError('compute_unavailable', 'The display did not become ready after the machine started; retry shortly.', { headers: retryAfter('displayStarting') }),
  typingTooLong: (seconds: number, maxSeconds: number, hint: string, details?: FieldError[]) =>
    new AppError('invalid_request', `Typing this would take about ${seconds} s; one keyboard/type call may take at most ${maxSeconds} s (typing and settling). Nothing was typed: send the text in shorter parts${hint}.`, { details }),
  desktopNotUp: () =>
    new AppError('compute_unavailable', 'The desktop is not up yet; retry shortly.', { headers: retryAfter('displayStarting') }),
  desktopFailed: (cause?: unknown) =>
    new AppError('internal_error', 'The desktop operation failed.', { cause }),
  modeTooLarge: (width: string | number, height: string | number, maxWidth: string | number, maxHeight: string | number, details?: FieldError[]) =>
    new AppError('invalid_request', `The display cannot show ${width}x${height}; the maximum is ${maxWidth}x${maxHeight}.`, { details }),
  noRandR: () =>
    new AppError('unsupported_operation', 'This display cannot change modes (no RandR output).'),
  outsideDisplay: (width: string | number, height: string | number, details?: FieldError[]) =>
    new AppError('invalid_request', `Coordinates are outside the ${width}x${height} display.`, { details }),
  downAndUp: (details?: FieldError[]) =>
    new AppError('invalid_request', 'down and up cannot both be set.', { details }),
  unknownKeyName: (details?: FieldError[]) =>
    new AppError('invalid_request', 'Unknown key name.', { details }),
  badEnrollBody: () =>
    new AppError('invalid_request', 'The body must be {"key": <32-128 base64url characters>}.'),
  enrollmentRefused: () =>
    new AppError('unauthenticated', 'Enrollment refused.'),
  keyRefused: (enrolled: boolean) =>
    new AppError('unauthenticated', enrolled ? 'Missing or invalid agent key.' : 'The agent is not enrolled.'),
  enrollBodyTooLarge: (max: number) =>
    new AppError('invalid_request', `An enrollment body is at most ${max} bytes.`),
  bodyTooLarge: () =>
    new AppError('invalid_request', 'Request body is too large.'),
  agentFailed: (cause?: unknown) =>
    new AppError('internal_error', 'The agent failed to handle the request.', { cause }),
  listingNotPermitted: (p: string | number) =>
    new AppError('permission_denied', `Listing ${p} is not permitted.`),
  readingNotPermitted: (path: string | number) =>
    new AppError('permission_denied', `Reading ${path} is not permitted.`),
  noSpaceToWrite: (p: string | number) =>
    new AppError('invalid_request', `No space left to write ${p}.`),
  readOnlyFileSystem: (p: string | number) =>
    new AppError('permission_denied', `${p} is on a read-only file system.`),
  writingNotPermitted: (p: string | number) =>
    new AppError('permission_denied', `Writing ${p} is not permitted.`),
  filesWorkerStopped: () =>
    new AppError('internal_error', 'The files worker stopped; retry the request.'),
  filesWorkerOutOfProtocol: () =>
    new AppError('internal_error', 'The files worker answered out of protocol.'),
  workerRefused: (e: { code: ErrorCode; message: string; details: FieldError[] }) => new AppError(e.code, e.message, { details: e.details }),
  noSecretsUser: () =>
    new AppError('internal_error', 'The guest user for secrets does not exist.'),
  secretsDirNotTmpfs: () =>
    new AppError('internal_error', 'The secrets directory is not on a memory-backed file system.'),
  secretsFileUnreadable: () =>
    new AppError('internal_error', 'The delivered secrets file is unreadable.'),
  secretsNotDelivered: (cause?: unknown) =>
    new AppError('internal_error', 'Could not deliver the secrets.', { cause }),
  noTerminal: (id: string | number) =>
    new AppError('not_found', `No terminal ${id}.`),
  tooManyTerminals: (max: number) =>
    new AppError('conflict', `At most ${max} terminals can be open.`),
  terminalAttached: (id: string | number) =>
    new AppError('conflict', `Terminal ${id} already has a client attached.`),
  terminalExited: (id: string | number) =>
    new AppError('conflict', `Terminal ${id} has exited.`),
  accessDenied: (asked: string | number) =>
    new AppError('permission_denied', `Access to ${asked} is denied.`),
  noSuchPath: (asked: string | number) =>
    new AppError('not_found', `No such file or directory: ${asked}`),
  accessNotPermitted: (asked: string | number) =>
    new AppError('permission_denied', `Access to ${asked} is not permitted.`),
  bodyOverLimit: (limit: string | number) =>
    new AppError('invalid_request', `Request body exceeds ${limit} bytes.`),
  noSuchAgentRoute: () =>
    new AppError('not_found', 'No such agent route.'),
  connectNeedsChannel: () =>
    new AppError('unsupported_operation', 'Connecting needs the agent HTTP/2 channel.'),
  tooManyTcpStreams: (max: number) =>
    new AppError('compute_unavailable', `Too many open connections (${max}).`, { headers: retryAfter('tcpStreams') }),
  portNotAccepting: (port: number, refused: boolean) =>
    new AppError('compute_unavailable', refused ? `Nothing is listening on port ${port}.` : `Port ${port} did not accept the connection.`),
  attachNeedsChannel: () =>
    new AppError('unsupported_operation', 'Attaching needs the agent HTTP/2 channel.'),
  streamNeedsChannel: () =>
    new AppError('unsupported_operation', 'The screen stream needs the agent channel.'),
};
