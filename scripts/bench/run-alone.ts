/**
 * A bench part run on its own (`node --import … scripts/bench/x.ts`) rather than from `npm run bench`: runs `part`
 * when `moduleUrl` is the script node was started with, then exits 0, or 1 with the error printed.
 */
import { pathToFileURL } from 'node:url';

export function runAlone(moduleUrl: string, part: () => Promise<unknown>): void {
  if (moduleUrl !== pathToFileURL(process.argv[1] ?? '').href) return;
  part().then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
