/**
 * A Substrate that reports how long its boots and captures take (operator metrics, docs/operations.md):
 * `create` when it boots the machine (not with `start: false`), `start`, and `capture`, each with its
 * outcome. Every other call is forwarded unchanged; timing never changes what the inner substrate does.
 */
import { callOn, forwarder } from './forward.js';
import { SUBSTRATE_CALLS, type Substrate } from './substrate.js';

export type TimedOp = 'create' | 'start' | 'capture';
export type TimingSink = (op: TimedOp, seconds: number, ok: boolean) => void;

export function timedSubstrate(inner: Substrate, sink: TimingSink): Substrate {
  const timed = async <T>(op: TimedOp, run: () => Promise<T>): Promise<T> => {
    const t0 = process.hrtime.bigint();
    const done = (ok: boolean) => sink(op, Number(process.hrtime.bigint() - t0) / 1e9, ok);
    try {
      const r = await run();
      done(true);
      return r;
    } catch (e) {
      done(false);
      throw e;
    }
  };
  return {
    ...forwarder<Substrate, (typeof SUBSTRATE_CALLS)[number]>(SUBSTRATE_CALLS, (name, args) => callOn(inner, name, args)),
    kind: inner.kind,
    create: (spec, opts) => (opts?.start === false ? inner.create(spec, opts) : timed('create', () => inner.create(spec, opts))),
    start: (id) => timed('start', () => inner.start(id)),
    capture: (id, holder) => timed('capture', () => inner.capture(id, holder)),
  };
}
