/**
 * The substrate watch: a periodic pass over the running machines (host health first, then the disk volume,
 * then each machine's liveness). A machine whose guest is gone moves to `error`, one whose guest shut itself
 * down moves to `stopped`.
 */
import { SYSTEM } from '../actor.js';
import type { MachineCore } from './core.js';
import { ERRORS } from '../../errors.js';

/** How often the substrate watch checks the running machines (a machine killed from outside is seen within this). */
const WATCH_INTERVAL_MS = 2_000;

/** `machine.failed {operation: run}`'s reason for each way the watch finds a running machine dead. */
const FAILED_REASON = { crashed: 'exited', frozen: 'frozen', lost: 'lost', absent: 'lost' } as const;

export function createSubstrateWatch(c: MachineCore, watchDiskVolume: () => Promise<boolean>) {
  const { d } = c;
  const { store, substrate, events, locks } = d;

  /**
   * One pass of the substrate watch over the running machines. A machine whose guest is gone (killed from
   * outside, crashed, its runtime died) moves to `error` with `machine.failed`; one whose guest shut itself
   * down cleanly moves to `stopped`. Either way the host side is cleaned (mount, port guard) so a start works.
   * The move is a compare-and-set on the row as it was read (state and state_changed_at), inside the disk
   * lock: a user's stop, restart or delete decided meanwhile wins and this pass reports nothing.
   */
  async function watchPass(): Promise<Array<{ id: string; to: 'error' | 'stopped' }>> {
    const out: Array<{ id: string; to: 'error' | 'stopped' }> = [];
    try {
      await d.hostHealth?.check();
    } catch (e) {
      d.onFailure?.('*', 'host_health', e);
    }
    // The machines just stopped and started again by a volume recovery need no liveness check this pass.
    if (await watchDiskVolume()) return out;
    // Machines are handled side by side: one dead machine's cleanup (seconds when podman lost its monitor)
    // does not delay noticing the next.
    const running = c.onThisHost(await store.machines.inStates(['running']));
    let answered = 0;
    await Promise.all(running.map(async (m) => {
      let seen;
      try {
        seen = await substrate.liveness(m.id);
        answered++;
      } catch (e) {
        d.onFailure?.(m.id, 'watch', e);
        return;
      }
      if (seen === 'running') return;
      const unchanged = async () => {
        const now = await store.machines.byId(m.id);
        return !!now && now.state === 'running' && now.state_changed_at === m.state_changed_at;
      };
      const to = await locks.run(m.id, async (): Promise<'error' | 'stopped' | null> => {
        if (!(await unchanged())) return null;
        // Asked again inside the lock: an act queued before this one may have changed the answer.
        const how = await substrate.liveness(m.id).catch(() => seen);
        if (how === 'running') return null;
        if (how === 'frozen') {
          // Every capture of this process holds the disk lock this runs in: a frozen machine here is a fault (a
          // control plane killed mid-capture, a freeze from outside). Thawed, it runs on; one that cannot be
          // thawed answers nothing, so it fails like a dead one (a start after the cleanup begins clean).
          try {
            await substrate.thaw(m.id);
            d.onFailure?.(m.id, 'watch_thaw', ERRORS.frozenWithoutCapture());
            return null;
          } catch (e) {
            d.onFailure?.(m.id, 'watch_thaw', e);
          }
        }
        d.agent.drop(m.id);
        const moved = await store.db.tx(async (): Promise<'error' | 'stopped' | null> => {
          if (!(await unchanged())) return null;
          if (how === 'shutdown') {
            if (!(await store.machines.casState(m.id, 'running', c.decideTo('running', 'exited'), c.at(), c.fence()))) return null;
            await d.leases.releaseInTx(m.org_id, m.id, 'machine_stopped', SYSTEM);
            await events.append(m.org_id, m.id, 'machine.stopped', { from: 'running', to: 'stopped', by: SYSTEM, reason: 'guest_shutdown' });
            return 'stopped';
          }
          if (!(await store.machines.casState(m.id, 'running', c.decideTo('running', 'fail'), c.at(), c.fence()))) return null;
          await d.leases.releaseInTx(m.org_id, m.id, 'machine_failed', SYSTEM);
          await events.append(m.org_id, m.id, 'machine.failed', {
            from: 'running', to: 'error', operation: 'run', code: 'compute_unavailable', reason: FAILED_REASON[how],
          });
          return 'error';
        });
        // Still inside the disk lock, so a start decided after the move runs after this: unmount and unguard
        // what the dead guest left (replacing a container podman lost track of), so that start begins clean.
        if (moved && how !== 'lost' && how !== 'absent') {
          await substrate.stop(m.id, { timeoutMs: 1_000 }).catch((e) => d.onFailure?.(m.id, 'watch_cleanup', e));
        }
        return moved;
      });
      if (to) {
        d.onFailure?.(m.id, 'run', ERRORS.guestFailed(to === 'stopped' ? 'shut down' : 'was killed or crashed', seen));
        out.push({ id: m.id, to });
      }
    }));
    if (running.length) await d.hostHealth?.substrateAnswered(answered > 0);
    return out;
  }

  return {
    watchPass,

    /**
     * Watch the substrate: every `intervalMs` (default 2 s, so a machine killed from outside is `error`
     * within about 2 s plus one probe) the running machines are checked. Returns the stop function.
     */
    startWatch(intervalMs = WATCH_INTERVAL_MS): () => void {
      let stopped = false;
      let timer: NodeJS.Timeout | null = null;
      const loop = () => {
        if (stopped) return;
        void watchPass()
          .catch((e) => d.onFailure?.('*', 'watch', e))
          .finally(() => {
            if (!stopped) timer = setTimeout(loop, intervalMs).unref();
          });
      };
      timer = setTimeout(loop, intervalMs).unref();
      return () => {
        stopped = true;
        if (timer) clearTimeout(timer);
      };
    },
  };
}
