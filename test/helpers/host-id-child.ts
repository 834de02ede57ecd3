/**
 * One process racing for a DATA_DIR's host id (control-plane/src/cluster/host-id.ts): prints `ready`, waits for a
 * line on stdin (so every racer starts at once), then prints the id it read or created.
 */
import readline from 'node:readline';
import { readOrCreateHostId } from '../../control-plane/src/cluster/host-id.js';

process.stdout.write('ready\n');
const lines = readline.createInterface({ input: process.stdin });
lines.once('line', () => {
  process.stdout.write(`${readOrCreateHostId(process.argv[2]!)}\n`);
  lines.close();
});
