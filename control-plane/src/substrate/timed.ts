/**
 * A Substrate that reports how long its boots and captures take (operator metrics, docs/operations.md):
 * `create` when it boots the machine (not with `start: false`), `start`, and `capture`, each with its
 * outcome. Everything else is forwarded unchanged; timing never changes what the inner substrate does.
 */
import type { Substrate } from './substrate.js';

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
    get kind() {
      return inner.kind;
    },
    create: (spec, opts) => (opts?.start === false ? inner.create(spec, opts) : timed('create', () => inner.create(spec, opts))),
    start: (id) => timed('start', () => inner.start(id)),
    capture: (id, holder) => timed('capture', () => inner.capture(id, holder)),
    stop: (id, opts) => inner.stop(id, opts),
    status: (id) => inner.status(id),
    liveness: (id) => inner.liveness(id),
    pinLayer: (layerId, holder) => inner.pinLayer(layerId, holder),
    releaseLayer: (layerId, holder) => inner.releaseLayer(layerId, holder),
    layerPins: () => inner.layerPins(),
    replaceDisk: (id, source) => inner.replaceDisk(id, source),
    destroy: (id) => inner.destroy(id),
    openChannel: (id) => inner.openChannel(id),
    issueEnrollment: (id) => inner.issueEnrollment(id),
    channelPath: (id) => inner.channelPath(id),
    diskUsage: (id) => inner.diskUsage(id),
    reattach: () => inner.reattach(),
    diskVolume: () => inner.diskVolume?.() ?? null,
    ...(inner.remountDiskVolume ? { remountDiskVolume: () => inner.remountDiskVolume!() } : {}),
    ...(inner.thaw ? { thaw: (id: string) => inner.thaw!(id) } : {}),
  };
}
