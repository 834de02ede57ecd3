/**
 * One real control plane for test/helpers/served-processes.ts: `serve()` (control-plane/src/main.ts) on a loopback
 * port with the fake substrate, over DATABASE_URL when `url` is given (PostgreSQL, shared with the other children),
 * else over SQLite in `dataDir`; `hostId`: the registered host it drives (services/placement.ts); `env`: settings added to
 * (or replacing) the defaults below; `stripeClient`: where the Stripe provider's API is (a loopback fake-stripe.ts).
 * argv[2]: JSON {url?, dataDir, hostId?, env?, stripeClient?}. Prints {ready, base} once it listens; {op:'exit'} on
 * stdin (or stdin closing: the test process is gone) closes it.
 */
import readline from 'node:readline';
import { parseConfig } from '../../control-plane/src/config.js';
import { serve } from '../../control-plane/src/main.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import type { StripeClientOptions } from '../../control-plane/src/billing/stripe.js';
import { FAST_SCRYPT, PUBLIC_BASE_URL } from './control-plane.js';

const args = JSON.parse(process.argv[2]!) as { url?: string; dataDir: string; hostId?: string; env?: Record<string, string>; stripeClient?: StripeClientOptions };
const config = parseConfig({
  PUBLIC_BASE_URL, DATA_DIR: args.dataDir, PORT: '0', HOST: '127.0.0.1', WARM_POOL_PER_SIZE: '0', SECRETS_KEYRING: 'off', TRUST_PROXY: 'true',
  ...(args.url ? { DATABASE_URL: args.url } : {}),
  ...args.env,
});
const running = await serve(config, {
  log: () => {},
  dashboardDir: null,
  // A host large enough that only the organization's quotas refuse.
  services: { substrate: new FakeSubstrate(), passwordCost: FAST_SCRYPT, hostResources: { memory_mb: 64 * 1024 * 1024, vcpu: 64 * 1024 }, hostId: args.hostId ?? null,
    ...(args.stripeClient ? { stripeClient: args.stripeClient } : {}) },
});
const stop = async () => {
  await running.close();
  process.exit(0);
};
const commands = readline.createInterface({ input: process.stdin });
commands.on('close', () => void stop());
commands.on('line', (text) => {
  if ((JSON.parse(text) as { op: string }).op === 'exit') void stop();
});
process.stdout.write(JSON.stringify({ pid: process.pid, ready: true, base: running.url }) + '\n');
