/**
 * The host-to-host move routes (docs/cluster.md, "Host-to-host calls"; docs/operations.md "Draining a host"): what
 * the deployment leader's drain (cluster/machine-move.ts) asks of a machine's source and target host, and what a live
 * fork made on another host asks of its parent's host (services/live-fork.ts), each served on this host's substrate
 * by services/move-acts.ts. Plugged into the internal listener through the host router
 * (internal-host-router.ts): the listener hands them host calls only, never a tenant's request.
 *
 * | request                                  | body (strict)              | answer (200)                    |
 * |------------------------------------------|----------------------------|---------------------------------|
 * | POST /internal/moves/<machine>/stop      | `{}`                       | `{}`: the guest stopped here     |
 * | POST /internal/moves/<machine>/capture   | `{"move":n}`               | `{"chain":<layer>}`             |
 * | POST /internal/moves/<machine>/pull      | `{"move":n,"from":<host>,"chain":…}` | `{"bytes":n}` (0: here)|
 * | POST /internal/moves/<machine>/disk      | `{"chain":<layer>}`        | `{}`: the disk made here         |
 * | POST /internal/moves/<machine>/start     | `{}`                       | `{}`: running, its agent answers |
 * | POST /internal/moves/<parent>/fork_capture | `{"fork":<machine>}`    | `{"chain":<layer>}` (live-fork.ts)|
 * | POST /internal/moves/<parent>/fork_release | `{"fork":<machine>}`    | `{}`: the fork's pin let go here |
 * | anything else                            |                            | 404 `not_found` (`noSuchHostCall`)|
 *
 * Every step is idempotent (move-acts.ts), so the leader may ask again. A body that is not JSON, larger than 16 KiB,
 * or not its step's strict shape is 400 and nothing is done; errors are the envelope.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError } from '../../shared/errors.js';
import { idPattern } from '../../shared/ids.js';
import { MAX_BODY_BYTES } from './cluster/forward/host-call.js';
import type { HostCall, HostHandlers } from './cluster/forward/listener.js';
import { ERRORS } from './errors.js';
import { hostCallRefusal, sendJson } from './internal-host-router.js';
import { silentLog, type LogSink } from './log.js';
import type { MoveActs } from './services/move-acts.js';
import { actStep, MOVE_BODIES, type MoveStep } from './services/move-steps.js';

const MACHINE = idPattern('machine').slice(1, -1);
const ROUTE = new RegExp(`^/internal/moves/(${MACHINE})/(${Object.keys(MOVE_BODIES).join('|')})$`);
const isStep = (s: string): s is MoveStep => Object.hasOwn(MOVE_BODIES, s);

export type MoveRoute = { machine: string; step: MoveStep };

/** The route a request names, or the error it gets (pure). */
export function moveRoute(method: string | undefined, url: string | undefined): MoveRoute | AppError {
  const m = ROUTE.exec(url ?? '');
  const step = m?.[2] ?? '';
  if (method !== 'POST' || !m || !isStep(step)) return ERRORS.noSuchHostCall();
  return { machine: m[1]!, step };
}

/** The request's body read to at most MAX_BODY_BYTES and parsed as JSON (empty: `{}`), or 400. */
async function jsonOf(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > MAX_BODY_BYTES) throw ERRORS.moveBodyNotJson();
    chunks.push(c);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return text.length ? (JSON.parse(text) as unknown) : {};
  } catch {
    throw ERRORS.moveBodyNotJson();
  }
}

/** The host handlers serving the move steps with `acts`. */
export function moveHostHandlers(acts: MoveActs, o: { log?: LogSink } = {}): HostHandlers {
  const log = o.log ?? silentLog;
  const refuse = hostCallRefusal(log, 'move_step_failed');
  async function serve(req: IncomingMessage, res: ServerResponse, c: HostCall): Promise<void> {
    const r = moveRoute(req.method, req.url);
    if (r instanceof AppError) {
      req.resume();
      return refuse(res, c, r);
    }
    const answer = await actStep(acts, r.machine, r.step, await jsonOf(req));
    log({ event: 'move_step', machine: r.machine, step: r.step, from_host: c.host_id });
    sendJson(res, answer);
  }
  return {
    request(req, res, c) {
      serve(req, res, c).catch((e: unknown) => (res.headersSent ? res.destroy() : refuse(res, c, e)));
    },
  };
}
