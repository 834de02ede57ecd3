/**
 * One child of test/helpers/pg-processes.ts. argv[2]: JSON {mode, url, ...}; commands arrive as JSON lines on
 * stdin; everything observed goes out as JSON lines on stdout.
 *   mode 'leader': competes for the deployment lock (control-plane/src/cluster/leader.ts); prints state changes
 *                  and the jobs' start/stop.
 */
import readline from 'node:readline';
import { onLeader, postgresLock } from '../../control-plane/src/cluster/leader.js';

const args = JSON.parse(process.argv[2]!) as { mode: 'leader'; url: string; intervalMs: number };
const say = (line: Record<string, unknown>): void => {
  process.stdout.write(JSON.stringify({ pid: process.pid, ...line }) + '\n');
};

const stops: Array<() => Promise<void>> = [];
readline.createInterface({ input: process.stdin }).on('line', async (text) => {
  const cmd = JSON.parse(text) as { op: string };
  if (cmd.op === 'exit') {
    for (const s of stops) await s();
    process.exit(0);
  }
});

if (args.mode === 'leader') {
  const election = onLeader(
    postgresLock(args.url),
    { start: () => say({ job: 'start' }), stop: () => say({ job: 'stop' }) },
    { intervalMs: args.intervalMs, onState: (state) => say({ state }), log: (l) => (l.event === 'leader.session_failed' ? say({ log: l.event }) : undefined) },
  );
  stops.push(() => election.stop());
}
say({ ready: true });
