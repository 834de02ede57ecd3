/**
 * `computer-admin hosts drain HOST [--json]` (issue 25 item 6; docs/operations.md "Draining a host"): moves HOST to
 * `draining` (placement stops choosing it), then follows the drain the deployment leader runs (services/drain.ts)
 * and prints a line for each thing it records — a machine planned with its target, each step done (bytes when
 * known), a wait with its reason, a failure that will be retried, a machine finished — until no machine is left on
 * HOST and no move off it is open; exit 0. The command does none of the work: Ctrl-C stops following, the drain goes
 * on. A host already draining is followed. PostgreSQL only: a SQLite deployment is one host, with nowhere to move to.
 */
import type { DrainRecord } from '../domain/drain.js';
import type { DrainRepo } from '../store/repos/drain.js';
import type { HostsRepo } from '../store/repos/hosts.js';
import type { MachineRow } from '../store/repos/machines.js';

export interface DrainFollowDeps {
  hosts: HostsRepo;
  drain: DrainRepo;
  onHost(hostId: string): Promise<MachineRow[]>;
  out(line: string): void;
  /** Between two reads of the drain's records (default 1 s). */
  pollMs?: number;
}

/** One progress line, as data (`--json` prints it as is). */
export type DrainLine =
  | { event: 'following'; host: string; was: string; machines: number }
  | { event: 'planned'; machine: string; index: number; of: number; to: string; was: string }
  | { event: 'step'; machine: string; index: number; of: number; step: string; bytes: number | null }
  | { event: 'waiting'; machine: string; index: number; of: number; reason: string }
  | { event: 'failed'; machine: string; index: number; of: number; step: string; reason: string }
  | { event: 'finished'; machine: string; index: number; of: number; on: string; state: string }
  | { event: 'empty'; host: string };

/** The line an operator reads. */
export function drainText(l: DrainLine): string {
  const who = 'machine' in l ? `machine ${l.index} of ${l.of} ${l.machine}: ` : '';
  switch (l.event) {
    case 'following':
      return `${l.host}: draining (was ${l.was}), ${l.machines} machine${l.machines === 1 ? '' : 's'} to move; Ctrl-C stops following, the drain goes on`;
    case 'planned':
      return `${who}moving to ${l.to} (was ${l.was})`;
    case 'step':
      return `${who}${l.step} done${l.bytes === null ? '' : `, ${l.bytes} bytes`}`;
    case 'waiting':
      return `${who}waiting: ${l.reason}`;
    case 'failed':
      return `${who}${l.step} failed, will retry: ${l.reason}`;
    case 'finished':
      return `${who}on ${l.on}, ${l.state}`;
    case 'empty':
      return `${l.host}: empty`;
  }
}

/** The line a drain record of machine `machine` (number `index` of `of`) makes, if any (a step begun makes none). */
export function lineFor(r: DrainRecord, machine: string, index: number, of: number): DrainLine | null {
  const who = { machine, index, of };
  switch (r.type) {
    case 'drain.planned':
      return { event: 'planned', ...who, to: r.to, was: r.was };
    case 'drain.step':
      return r.phase === 'done' ? { event: 'step', ...who, step: r.step, bytes: r.bytes } : null;
    case 'drain.waiting':
      return { event: 'waiting', ...who, reason: r.reason };
    case 'drain.failed':
      return { event: 'failed', ...who, step: r.step, reason: r.reason };
    case 'drain.finished':
      return { event: 'finished', ...who, on: r.to, state: r.state };
  }
}

/** Machines still on `host` or with a move off it open, oldest first. */
async function remaining(d: DrainFollowDeps, host: string): Promise<string[]> {
  const on = (await d.onHost(host)).map((m) => m.id);
  const moving: string[] = [];
  for (const id of await d.drain.openMoves()) {
    const planned = (await d.drain.records(id)).filter((r) => r.type === 'drain.planned').pop();
    if (planned?.from === host && !on.includes(id)) moving.push(id);
  }
  return [...moving, ...on];
}

/**
 * Follows the drain of `host` (now `draining`, once `was`) until it is empty, from the drain records after `cursor`
 * (read before the host was set draining, so no record is missed); the lines through `emit`.
 */
export async function followDrain(host: string, was: string, from: number, d: DrainFollowDeps, emit: (l: DrainLine) => void): Promise<void> {
  const pollMs = d.pollMs ?? 1000;
  let cursor = from;
  const known = await remaining(d, host);
  emit({ event: 'following', host, was, machines: known.length });
  for (;;) {
    // Read what is left first: every record committed before it is printed before the last line.
    const empty = (await remaining(d, host)).length === 0;
    for (let batch = await d.drain.since(cursor); batch.length > 0; batch = await d.drain.since(cursor)) {
      for (const { machineId, record } of batch) {
        cursor = record.seq;
        if (record.from !== host) continue;
        if (!known.includes(machineId)) known.push(machineId);
        const line = lineFor(record, machineId, known.indexOf(machineId) + 1, known.length);
        if (line) emit(line);
      }
    }
    if (empty) {
      emit({ event: 'empty', host });
      return;
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
