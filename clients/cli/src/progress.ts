/** A one-line progress bar on stderr, drawn only when stderr is a terminal (never in logs or pipes). */
import type { Progress } from '../../sdk/src/index.js';
import { formatBytes } from './output.js';

export interface Bar {
  update: Progress;
  /** Ends the line (only if something was drawn). */
  done(): void;
}

const WIDTH = 30;

export function progressBar(stream: NodeJS.WriteStream, label: string): Bar {
  if (!stream.isTTY) return { update: () => {}, done: () => {} };
  let drawn = false;
  return {
    update(done, total) {
      drawn = true;
      const frac = total ? Math.min(1, done / total) : 0;
      const fill = Math.round(frac * WIDTH);
      const bar = total ? `[${'#'.repeat(fill)}${'.'.repeat(WIDTH - fill)}] ${String(Math.floor(frac * 100)).padStart(3)}%` : '[?]';
      stream.write(`\r\x1b[K${label} ${bar} ${formatBytes(done)}${total ? ` / ${formatBytes(total)}` : ''}`);
    },
    done() {
      if (drawn) stream.write('\n');
    },
  };
}
