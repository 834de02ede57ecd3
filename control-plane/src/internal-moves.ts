/**
 * The host-to-host move routes (docs/cluster.md, "Host-to-host calls"; docs/operations.md "Draining a host"): what
 * the deployment leader's drain (cluster/machine-move.ts) asks of a machine's source and target host, each served on
 * this host's substrate by services/move-acts.ts. Plugged into the internal listener through the host router
 * (internal-host-router.ts): the listener hands them host calls only, never a tenant's request.
 *
 * | request                                  | body (strict)              | answer (200)                    |
 * |------------------------------------------|----------------------------|---------------------------------|
 * | POST /internal/moves/<machine>/stop      | `{}`                       | `{}`: the guest stopped here     |
 * | POST /internal/moves/<machine>/capture   | `{"move":n}`               | `{"chain":<layer>}`             |
 * | POST /internal/moves/<machine>/pull      | `{"move":n,"from":<host>,"chain":…}` | `{"bytes":n}` (0: here)|
 * | POST /internal/moves/<machine>/disk      | `{"chain":<layer>}`        | `{}`: the disk made here         |
 * | POST /internal/moves/<machine>/start     | `{}`                       | `{}`: running, its agent answers |
 * | anything else                            |                            | 404 `not_found` (`noSuchHostCall`)|
 *
 * Every step is idempotent (move-acts.ts), so the leader may ask again. A body that is not JSON, larger than 16 KiB,
 * or not its step's strict shape is 400 and nothing is done; errors are the envelope.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { AppError, parseOrThrow } from '../../shared/errors.js';
import { idPattern } from '../../shared/ids.js';
import { MAX_BODY_BYTES } from './cluster/forward/host-call.js';
import type { HostCall, HostHandlers } from './cluster/forward/listener.js';
import { LayerId } from './cluster/layer-fetch.js';
import { ERRORS } from './errors.js';
import { hostCallRefusal, sendJson } from './internal-host-router.js';
import { silentLog, type LogSink } from './log.js';
import type { MoveActs } from './services/move-acts.js';

const HostId = z.string().regex(new RegExp(idPattern('host')));
/** A move: its plan's record seq (services/machine-move.ts `MovingMachine.move`). */
const Move = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

type Nothing = Record<string, never>;
/** Each step's body and answer. */
export interface MoveStepShapes {
  stop: { body: Nothing; answer: Nothing };
  capture: { body: { move: number }; answer: { chain: string } };
  pull: { body: { move: number; from: string; chain: string }; answer: { bytes: number } };
  disk: { body: { chain: string }; answer: Nothing };
  start: { body: Nothing; answer: Nothing };
}
export type MoveStep = keyof MoveStepShapes;
export type MoveBody<S extends MoveStep> = MoveStepShapes[S]['body'];
export type MoveAnswer<S extends MoveStep> = MoveStepShapes[S]['answer'];

/** Each step's body, strict: an unknown field is a 400. */
export const MOVE_BODIES: { [S in MoveStep]: z.ZodType<MoveBody<S>> } = {
  stop: z.strictObject({}),
  capture: z.strictObject({ move: Move }),
  pull: z.strictObject({ move: Move, from: HostId, chain: LayerId }),
  disk: z.strictObject({ chain: LayerId }),
  start: z.strictObject({}),
};

/** Each step's answer, as the calling side parses it (cluster/machine-move.ts). */
export const MOVE_ANSWERS: { [S in MoveStep]: z.ZodType<MoveAnswer<S>> } = {
  stop: z.strictObject({}),
  capture: z.strictObject({ chain: LayerId }),
  pull: z.strictObject({ bytes: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER) }),
  disk: z.strictObject({}),
  start: z.strictObject({}),
};

/** What each step does on this host with its checked body (services/move-acts.ts); the calling side's local path too. */
export const MOVE_ACTS: { [S in MoveStep]: (acts: MoveActs, machine: string, body: MoveBody<S>) => Promise<MoveAnswer<S>> } = {
  stop: (a, id) => a.stop(id).then(() => ({})),
  capture: (a, id, b) => a.capture(id, b.move),
  pull: (a, id, b) => a.pull(id, b.move, b.from, b.chain),
  disk: (a, id, b) => a.makeDisk(id, b.chain).then(() => ({})),
  start: (a, id) => a.start(id).then(() => ({})),
};

/** `step` of `machine` with `body` checked first (a 400 acts nothing), acted with `acts`. */
export function actStep<S extends MoveStep>(acts: MoveActs, machine: string, step: S, body: unknown): Promise<MoveAnswer<S>> {
  const schema: z.ZodType<MoveBody<S>> = MOVE_BODIES[step];
  return MOVE_ACTS[step](acts, machine, parseOrThrow(schema, body));
}

const MACHINE = idPattern('machine').slice(1, -1);
const ROUTE = new RegExp(`^/internal/moves/(${MACHINE})/(${Object.keys(MOVE_BODIES).join('|')})$`);
const isStep = (s: string): s is MoveStep => Object.hasOwn(MOVE_BODIES, s);

export type MoveRoute = { machine: string; step: MoveStep };

/** The path of `step` for `machine` (the calling side builds it so). */
export const movePath = (machine: string, step: MoveStep): string => `/internal/moves/${machine}/${step}`;

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
