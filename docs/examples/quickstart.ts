// Quickstart (run: COMPUTER_BASE_URL=http://127.0.0.1:8080 COMPUTER_API_KEY=sk_... node --import @tapjs/typescript/import docs/examples/quickstart.ts)
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Computer } from '../../clients/sdk/src/index.js';

export async function quickstart(baseUrl: string, apiKey: string): Promise<string> {
  const cx = new Computer({ baseUrl, apiKey });
  const m = await cx.createMachine({ name: 'quickstart' });
  try {
    writeFileSync('screen.png', await m.screenshot()); // 503 while the desktop boots: the SDK retries
    // A terminal window on the desktop; wait until it has the keyboard focus.
    const xterm = "setsid xterm -xrm '*allowTitleOps: false' -title quickstart </dev/null >/dev/null 2>&1 &";
    await m.exec({ command: ['bash', '-c', xterm] });
    const focused = () => m.exec({ command: ['xdotool', 'getwindowfocus', 'getwindowname'] });
    while ((await focused()).stdout.trim() !== 'quickstart') await sleep(200);
    const lease = await m.control(); // type like a person: a session holding the input lease
    await lease.type('echo hi > /tmp/x');
    await lease.key('Return');
    await lease.release();
    for (;;) {
      const file = await m.readFile('/tmp/x').catch(() => null); // 404 until the shell has written it
      if (file?.length) return file.toString();
      await sleep(200);
    }
  } finally {
    await m.delete();
  }
}
if (process.argv[1]?.endsWith('quickstart.ts')) console.log(await quickstart(process.env.COMPUTER_BASE_URL!, process.env.COMPUTER_API_KEY!));
