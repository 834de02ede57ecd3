/**
 * One real control plane for test/helpers/served-processes.ts: `serve()` (control-plane/src/main.ts) on a loopback
 * port with the fake substrate, over DATABASE_URL when `url` is given (PostgreSQL, shared with the other children),
 * else over SQLite in `dataDir`. argv[2]: JSON {url?, dataDir, requests?, hostShape?, region?, sweepMs?, env?,
 * stripeClient?}; `env`: settings added to (or replacing) the defaults below; `stripeClient`: where the Stripe
 * provider's API is (a loopback fake-stripe.ts); `hostShape`: the
 * shape its host registers (default: one so large that only the organization's quotas refuse). Prints {ready, base,
 * driving, internal} once it listens (whether it drives the host, its internal listener); then {log: 'host.driving'}
 * when it takes the host over, {log: 'forward_refused', reason} for the internal listener's refusals, and with
 * `requests` one line per request {log: 'request', operation, request_id, status, forwarded_to?, via?}. Also prints its
 * deployment leader state changes ({state: 'leading' | 'following'}), what it tells the operator ({say: line}, e.g.
 * its reconcile) and, with `sweepMs` (the session sweep's period), {sweep: true} after each of the leader's session
 * sweeps, so a test sees the deployment's jobs run in this process. With `hostFileSubstrate` its substrate keeps the
 * host's machines in a file in `dataDir` (host-file-substrate.ts: they outlive the process, as a real host's do), it
 * prints {substrate: 'create', id} as each create enters it, and {op:'hold', call:'create'} on stdin holds every
 * create from then on inside the substrate (FakeSubstrate.hold: its row recorded, not finished), answered {held};
 * {op:'release', call:'create'} lets them go on, answered {released}.
 * Each reconcile it runs once serving (at a takeover) prints {reconciled: [[id, from, to], …]}. {op:'exit'} on
 * stdin (or stdin closing: the test process is gone) closes it.
 */
import path from 'node:path';
import readline from 'node:readline';
import { DeferredSubstrate, preparedContainer } from '../../control-plane/src/machine-host.js';
import { ContainerSubstrate, containerEarlyChannel } from '../../control-plane/src/substrate/container/driver.js';
import { testImage } from './substrate-image.js';
import { parseConfig } from '../../control-plane/src/config.js';
import { serve } from '../../control-plane/src/main.js';
import type { HostShape } from '../../control-plane/src/domain/host-capacity.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import type { StripeClientOptions } from '../../control-plane/src/billing/stripe.js';
import { FAST_SCRYPT, PUBLIC_BASE_URL } from './control-plane.js';
import { HostFileSubstrate } from './host-file-substrate.js';

const args = JSON.parse(process.argv[2]!) as { url?: string; dataDir: string; hostFileSubstrate?: boolean; containers?: boolean; requests?: boolean; hostShape?: HostShape; region?: string; sweepMs?: number; env?: Record<string, string>; stripeClient?: StripeClientOptions };
const say = (line: Record<string, unknown>): void => void process.stdout.write(JSON.stringify(line) + '\n');
const REPORTED: Record<string, ReadonlyArray<string>> = {
  'host.driving': ['epoch'],
  'host.returned': ['stopped', 'still_error'],
  forward_refused: ['reason'],
  ...(args.requests ? { request: ['operation', 'request_id', 'status', 'forwarded_to', 'via'] } : {}),
};
const TIB = 1024 ** 4;
const HUGE: HostShape = { cores: 64 * 1024, memory_bytes: 64 * TIB, disk_bytes: 1024 * TIB };
const fake = args.containers ? null : args.hostFileSubstrate ? new HostFileSubstrate(args.dataDir, (op, id) => say({ substrate: op, id })) : new FakeSubstrate();
// `containers`: the real container substrate in DATA_DIR/substrate (its own btrfs volume, bridge and subnet), deferred
// as `npm start` has it, so its layers move between hosts (machine-host.ts `preparedContainer`).
const root = path.join(args.dataDir, 'substrate');
const substrate = fake ?? new DeferredSubstrate('container', async () => {
  const image = await testImage('container', (l) => say({ say: l }));
  return preparedContainer(new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000 }), image);
}, containerEarlyChannel(root));
const config = parseConfig({
  PUBLIC_BASE_URL, DATA_DIR: args.dataDir, PORT: '0', HOST: '127.0.0.1', WARM_POOL_PER_SIZE: '0', SECRETS_KEYRING: 'off', TRUST_PROXY: 'true',
  ...(args.url ? { DATABASE_URL: args.url } : {}),
  ...(args.region ? { REGION: args.region } : {}),
  ...args.env,
});
const running = await serve(config, {
  log: (l) => {
    if (l.event === 'leader.state') say({ state: l.state });
    const fields = REPORTED[String(l.event)];
    if (fields) say({ log: l.event, ...Object.fromEntries(fields.map((f) => [f, l[f]])) });
  },
  say: (line) => say({ say: line }),
  dashboardDir: null,
  ...(args.sweepMs ? { jobPeriodsMs: { sweep: args.sweepMs } } : {}),
  // A host large enough that only the organization's quotas refuse.
  services: {
    substrate, passwordCost: FAST_SCRYPT, ...(args.containers ? { agentTimeouts: { connectMs: 5000, requestMs: 60_000 } } : {}), hostResources: { memory_mb: 64 * 1024 * 1024, vcpu: 64 * 1024 },
    ...(args.stripeClient ? { stripeClient: args.stripeClient } : {}),
  },
  hostShape: args.hostShape ?? HUGE,
});
const sweep = running.services.sessions.sweep;
running.services.sessions.sweep = async () => {
  const r = await sweep();
  say({ sweep: true });
  return r;
};
const reconcile = running.services.machines.reconcile;
running.services.machines.reconcile = async (o) => {
  const moved = await reconcile(o);
  say({ reconciled: moved.map((m) => [m.id, m.from, m.to]) });
  return moved;
};
const stop = async () => {
  await running.close();
  process.exit(0);
};
const holds = new Map<'create', () => void>();
const commands = readline.createInterface({ input: process.stdin });
commands.on('close', () => void stop());
commands.on('line', (text) => {
  const cmd = JSON.parse(text) as { op: string; call?: 'create' };
  if (cmd.op === 'exit') void stop();
  if (cmd.op === 'hold' && cmd.call) {
    if (fake) holds.set(cmd.call, fake.hold(cmd.call));
    say({ held: cmd.call });
  }
  if (cmd.op === 'release' && cmd.call) {
    holds.get(cmd.call)?.();
    holds.delete(cmd.call);
    say({ released: cmd.call });
  }
});
say({ pid: process.pid, ready: true, base: running.url, driving: running.driving(), internal: running.internalUrl });
