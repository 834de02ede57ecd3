// Quickstart (run: COMPUTER_BASE_URL=http://127.0.0.1:8080 COMPUTER_API_KEY=sk_... node --import @tapjs/typescript/import docs/examples/quickstart.ts)
import { writeFileSync } from 'node:fs';
import { Computer } from '../../clients/sdk/src/index.js';

export async function quickstart(baseUrl: string, apiKey: string): Promise<string> {
  const cx = new Computer({ baseUrl, apiKey });
  const m = await cx.createMachine({ name: 'quickstart' });
  try {
    writeFileSync('screen.png', await m.screenshot()); // 503 while the desktop boots: the SDK retries
    // A shell on a terminal (a pty in the machine) attached as a stream: type a line, then exit.
    const term = await m.attachTerminal((await m.openTerminal({ cols: 100, rows: 30 })).id);
    term.resume(); // we only want the exit status, not the echo
    term.write('echo hi > /tmp/x; exit\n');
    if ((await term.exited) !== 0) throw new Error('the shell failed');
    return (await m.readFile('/tmp/x')).toString();
  } finally {
    await m.delete();
  }
}

if (process.argv[1]?.endsWith('quickstart.ts')) console.log(await quickstart(process.env.COMPUTER_BASE_URL!, process.env.COMPUTER_API_KEY!));
