/**
 * One real control plane for test/helpers/served-processes.ts: `serve()` (control-plane/src/main.ts) on a loopback
 * port with the fake substrate, over DATABASE_URL when `url` is given (PostgreSQL, shared with the other children),
 * else over SQLite in `dataDir`; `hostId`: the registered host it drives (services/placement.ts). argv[2]: JSON {url?, dataDir, hostId?, sweepMs?}. Prints {ready, base} once it listens; {op:'exit'} on
 * stdin (or stdin closing: the test process is gone) closes it. Also prints its deployment leader state changes
 * ({state: 'leading' | 'following'}), what it tells the operator ({say: line}, e.g. its reconcile) and, with `sweepMs` (the session sweep's period), {sweep: true} after each of
 * the leader's session sweeps, so a test sees the deployment's jobs run in this process.
 */
import readline from 'node:readline';
import { parseConfig } from '../../control-plane/src/config.js';
import { serve } from '../../control-plane/src/main.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { FAST_SCRYPT, PUBLIC_BASE_URL } from './control-plane.js';

const args = JSON.parse(process.argv[2]!) as { url?: string; dataDir: string; hostId?: string; sweepMs?: number };
const say = (line: Record<string, unknown>): void => void process.stdout.write(JSON.stringify(line) + '\n');
const config = parseConfig({
  PUBLIC_BASE_URL, DATA_DIR: args.dataDir, PORT: '0', HOST: '127.0.0.1', WARM_POOL_PER_SIZE: '0', SECRETS_KEYRING: 'off', TRUST_PROXY: 'true',
  ...(args.url ? { DATABASE_URL: args.url } : {}),
});
const running = await serve(config, {
  log: (l) => (l.event === 'leader.state' ? say({ state: l.state }) : undefined),
  say: (line) => say({ say: line }),
  dashboardDir: null,
  ...(args.sweepMs ? { jobPeriodsMs: { sweep: args.sweepMs } } : {}),
  // A host large enough that only the organization's quotas refuse.
  services: { substrate: new FakeSubstrate(), passwordCost: FAST_SCRYPT, hostResources: { memory_mb: 64 * 1024 * 1024, vcpu: 64 * 1024 }, hostId: args.hostId ?? null },
});
const sweep = running.services.sessions.sweep;
running.services.sessions.sweep = async () => {
  const r = await sweep();
  say({ sweep: true });
  return r;
};
const stop = async () => {
  await running.close();
  process.exit(0);
};
const commands = readline.createInterface({ input: process.stdin });
commands.on('close', () => void stop());
commands.on('line', (text) => {
  if ((JSON.parse(text) as { op: string }).op === 'exit') void stop();
});
say({ pid: process.pid, ready: true, base: running.url });
