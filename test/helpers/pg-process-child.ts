/**
 * One child of test/helpers/pg-processes.ts. argv[2]: JSON {mode, url, ...}; commands arrive as JSON lines on
 * stdin; everything observed goes out as JSON lines on stdout.
 *   mode 'leader':  competes for the deployment lock (control-plane/src/cluster/leader.ts); prints state changes
 *                   and the jobs' start/stop.
 *   mode 'publish': on {op:'publish', machine, ids}, records one event per id, each in its own transaction
 *                   (control-plane/src/cluster/notify.ts), and prints {published: seq, id} after each commit.
 *   mode 'host-driver': competes to drive host `hostId` (control-plane/src/cluster/host-driver.ts); prints state
 *                   changes, {driving: epoch} when its work starts, {work: 'stop'} when it stops, and
 *                   {log: 'host.driver_fenced'} when its heartbeat's compare-and-set fails.
 *   mode 'serve-jobs': a whole control plane (main.ts serve) on DATABASE_URL `url`, no substrate, its clock at `t0` until
 *                   {op:'clock', t}; its jobs every `periodMs`; prints its leader state, every session sweep
 *                   ({sweep: idled, expired}) and every flush ({flushed}).
 *   mode 'follow':  follows the events from `from` and prints {event: seq, id} for each, in the order received;
 *                   {connected}/{disconnected} around each LISTEN session. With `holdReconnects`, every connect
 *                   after the first waits for {op:'reconnect'} (so the test decides what happens while it is away).
 *   mode 'serve':   a whole control plane (main.ts `serve`) on `url`, on 127.0.0.1 port 0, with the fake substrate
 *                   (`substrate: true`) or none; prints {port} once listening, and its `events.*` log lines.
 */
import readline from 'node:readline';
import { driveHost, hostDriverLock } from '../../control-plane/src/cluster/host-driver.js';
import { onLeader, postgresLock } from '../../control-plane/src/cluster/leader.js';
import { followEvents, postgresListen, readEventsAfter, type ListenConnector } from '../../control-plane/src/cluster/notify.js';
import { publishEvents } from '../../control-plane/src/store/events-publish.js';
import { parseConfig } from '../../control-plane/src/config.js';
import { serve } from '../../control-plane/src/main.js';
import { openStoreDb } from '../../control-plane/src/store/engine/open.js';
import { openPostgres } from '../../control-plane/src/store/engine/postgres.js';
import { hostsRepo } from '../../control-plane/src/store/repos/hosts.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';

/** helpers/control-plane.ts's FAST_SCRYPT and PUBLIC_BASE_URL (not imported: that module loads tap, which a child must not). */
const FAST_SCRYPT = { N: 1024, r: 8, p: 1 };
const PUBLIC_BASE_URL = 'http://cp.test';

type Args =
  | { mode: 'leader'; url: string; intervalMs: number }
  | { mode: 'publish'; url: string }
  | { mode: 'host-driver'; url: string; hostId: string; intervalMs: number; heartbeatMs: number }
  | { mode: 'follow'; url: string; from: number; retryMs: number; holdReconnects?: boolean }
  | { mode: 'serve'; url: string; dataDir: string; substrate: boolean }
  | { mode: 'serve-jobs'; url: string; dataDir: string; t0: number; periodMs: number };
type Command = { op: 'exit' } | { op: 'reconnect' } | { op: 'publish'; machine: string; org: string; ids: string[] } | { op: 'clock'; t: number };

const args = JSON.parse(process.argv[2]!) as Args;
const say = (line: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify({ pid: process.pid, ...line }) + '\n');
};

const stops: Array<() => Promise<void>> = [];
const handlers: Array<(cmd: Command) => Promise<void> | void> = [];
let queue = Promise.resolve();
// stdin closes when the test process dies, however it dies: the child goes with it, never orphaned.
const commands = readline.createInterface({ input: process.stdin });
commands.on('close', () => process.exit(0));
commands.on('line', (text) => {
  const cmd = JSON.parse(text) as Command;
  queue = queue.then(async () => {
    if (cmd.op === 'exit') {
      for (const s of stops) await s();
      process.exit(0);
    }
    for (const h of handlers) await h(cmd);
  });
});

if (args.mode === 'leader') {
  const election = onLeader(
    postgresLock(args.url),
    { start: () => say({ job: 'start' }), stop: () => say({ job: 'stop' }) },
    { intervalMs: args.intervalMs, onState: (state) => say({ state }), log: (l) => (l.event === 'leader.session_failed' ? say({ log: l.event }) : undefined) },
  );
  stops.push(() => election.stop());
} else if (args.mode === 'host-driver') {
  const db = await openStoreDb({ databaseUrl: args.url, dataDir: '/nonexistent' });
  const capacity = { cores: 2, memory_bytes: 1, disk_bytes: 1, machines: { small: 0, standard: 0, large: 0 } };
  const driver = driveHost({
    hosts: hostsRepo(db),
    registration: { id: args.hostId, region: 'default', capacity, internalUrl: `http://127.0.0.1/${process.pid}` },
    connect: hostDriverLock(args.url, args.hostId),
    work: { start: (fence) => say({ driving: fence.epoch }), stop: () => say({ work: 'stop' }) },
    intervalMs: args.intervalMs,
    heartbeatMs: args.heartbeatMs,
    onState: (state) => say({ state }),
    log: (l) => (l.event === 'host.driver_fenced' || l.event === 'leader.session_failed' ? say({ log: l.event }) : undefined),
  });
  stops.push(() => driver.stop(), () => db.close());
} else if (args.mode === 'serve-jobs') {
  let t = args.t0;
  const config = parseConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: args.dataDir, DATABASE_URL: args.url, LEADER_INTERVAL_MS: '200' });
  const running = await serve(config, {
    log: (l) => (l.event === 'leader.state' ? say({ state: l.state }) : undefined),
    services: { now: () => new Date(t), keyring: null, passwordCost: FAST_SCRYPT },
    jobPeriodsMs: { flush: args.periodMs, sweep: args.periodMs, billing: args.periodMs },
  });
  const sessions = running.services.sessions;
  const sweep = sessions.sweep;
  sessions.sweep = async () => {
    const r = await sweep();
    say({ sweep: true, ...r });
    return r;
  };
  running.services.metering.onFlush(async () => say({ flushed: true }));
  stops.push(() => running.close());
  handlers.push((cmd) => {
    if (cmd.op !== 'clock') return;
    t = cmd.t;
    say({ clock: t });
  });
} else if (args.mode === 'publish') {
  const engine = await openPostgres(args.url, { max: 2 });
  stops.push(engine.close);
  handlers.push(async (cmd) => {
    if (cmd.op !== 'publish') return;
    for (const id of cmd.ids) {
      const [seq] = await engine.db.transaction().execute((trx) =>
        publishEvents(trx, [{ id, org_id: cmd.org, machine_id: cmd.machine, type: 'machine.state', data: '{}', created_at: new Date().toISOString() }]),
      );
      say({ published: seq, id });
    }
    say({ done: cmd.ids.length });
  });
} else if (args.mode === 'serve') {
  const config = parseConfig({
    PORT: '0', HOST: '127.0.0.1', DATA_DIR: args.dataDir, DATABASE_URL: args.url, PUBLIC_BASE_URL, WARM_POOL_PER_SIZE: '0', SECRETS_KEYRING: 'off',
  });
  const running = await serve(config, {
    services: { passwordCost: FAST_SCRYPT, ...(args.substrate ? { substrate: new FakeSubstrate() } : {}) },
    log: (l) => (String(l.event).startsWith('events.') ? say({ log: l.event }) : undefined),
    dashboardDir: null,
  });
  stops.push(running.close);
  say({ port: running.port });
} else {
  const engine = await openPostgres(args.url, { max: 2 });
  stops.push(engine.close);
  const listen = postgresListen(args.url);
  let connects = 0;
  const releases: Array<() => void> = [];
  handlers.push((cmd) => {
    if (cmd.op === 'reconnect') for (const r of releases.splice(0)) r();
  });
  const held: ListenConnector = async (onNotify) => {
    if (args.holdReconnects && connects++ > 0) {
      say({ waiting: true });
      await new Promise<void>((r) => releases.push(r));
    }
    return listen(onNotify);
  };
  const feed = followEvents({
    listen: held,
    read: readEventsAfter(engine.db),
    from: args.from,
    retryMs: args.retryMs,
    onEvents: (rows) => rows.forEach((r) => say({ event: r.seq, id: r.id })),
    onConnected: () => say({ connected: true }),
    onDisconnected: () => say({ disconnected: true }),
  });
  stops.unshift(() => feed.stop());
}
say({ ready: true });
