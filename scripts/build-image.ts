/**
 * `npm run image`: build (or find cached) the guest image for the current recipe and agent.
 * Usage: node dist/scripts/build-image.js [--container] [--cache-dir DIR]
 *   --repo DIR overrides the repository root (default: found above this script).
 *   default builds every artifact (container root + vm kernel, initrd, qcow2); --container skips the vm disk.
 * The cache directory defaults to $COMPUTER_IMAGE_CACHE or ~/.cache/computer/images.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { defaultImageCacheDir, ensureImage } from '../control-plane/src/substrate/image.js';

export function findRepoRoot(from: string): string {
  let dir = from;
  for (;;) {
    const pj = path.join(dir, 'package.json');
    if (fs.existsSync(pj) && fs.existsSync(path.join(dir, 'images', 'build.sh'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error('repository root not found');
    dir = up;
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { container: { type: 'boolean' }, 'cache-dir': { type: 'string' }, repo: { type: 'string' } } });
  const cacheDir = values['cache-dir'] ?? process.env.COMPUTER_IMAGE_CACHE ?? defaultImageCacheDir();
  const started = Date.now();
  const img = await ensureImage({
    repoRoot: values.repo ?? findRepoRoot(path.dirname(fileURLToPath(import.meta.url))),
    cacheDir,
    artifacts: values.container ? 'container' : 'all',
    log: (l) => console.log(l),
  });
  console.log(`image ${img.hash} ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${img.dir}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main().catch((e) => {
    console.error(`build-image: ${(e as Error).message}`);
    process.exit(1);
  });
}
