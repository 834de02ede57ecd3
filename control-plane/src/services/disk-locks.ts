/**
 * One act on a machine's disk at a time: create, start, stop, capture, restore and destroy of one machine run
 * in the order they were asked for. Decisions are already serialised by SQLite compare-and-set; this orders
 * the acts that follow them, so a capture never races a stop's unmount, nor a destroy a restore.
 *
 * Invariant the callers keep: `run` is called synchronously after the transaction that decided the act (no
 * `await` in between), so acts queue in the order their decisions committed. Not re-entrant: code already
 * inside `run` for a machine calls the substrate directly.
 */
export class DiskLocks {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(machineId: string, act: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(machineId) ?? Promise.resolve();
    const p = prev.then(act, act);
    const tail = p.catch(() => {});
    this.tails.set(machineId, tail);
    void tail.then(() => {
      if (this.tails.get(machineId) === tail) this.tails.delete(machineId);
    });
    return p;
  }
}
