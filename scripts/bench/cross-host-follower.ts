/**
 * Process B of the `crosshost` bench (scripts/bench/cross-host.ts), a child with its own event loop as a real
 * deployment's other process would be: a `serve()` control plane on the PostgreSQL named by argv[2] and the DATA_DIR
 * argv[3] (the bench's own, so the same host, which the bench's process drives), with a substrate it never uses.
 * Prints `ready <url> <driving>` once serving; closes and exits when stdin ends (so `--cpu-prof` writes its profile).
 */
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { serveOn } from './cross-host-serve.js';

const [databaseUrl, dataDir] = process.argv.slice(2);
if (!databaseUrl || !dataDir) throw new Error('usage: cross-host-follower.js DATABASE_URL DATA_DIR');
const b = await serveOn(dataDir, databaseUrl, new FakeSubstrate());
process.stdin.on('end', () => void b.close().then(() => process.exit(0)));
process.stdin.resume();
process.stdout.write(`ready ${b.url} ${b.driving()}\n`);
