/** What one forward is (to whom, for whom) and how its signed request is opened: shared by forwarder.ts and the two kinds of forward it makes. */
import type http from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { Assertion } from './assertion.js';
import type { AuthorizationRule } from './headers.js';
import type { RemoteOwner } from './owner.js';

/** One forward: to whom, for whom, and whether the caller's Authorization is the guest app's own (previews). */
export interface ForwardCall {
  target: RemoteOwner;
  assertion: Assertion;
  authorization: AuthorizationRule;
}

/** What a forward reads of the caller's request: a socket's, or one made inside the process (forward-fetch.ts). */
export type DialedRequest = Pick<IncomingMessage, 'method' | 'url' | 'rawHeaders'>;

/** Opens the signed request for one forward (its body, if any, still to be written); `fresh`: on a new connection, never a pooled one. */
export type Dial = (req: DialedRequest, call: ForwardCall, upgrade: boolean, fresh?: boolean) => http.ClientRequest;
