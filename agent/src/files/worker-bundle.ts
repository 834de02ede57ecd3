/**
 * The files worker of a development checkout, as one file the `agent` user can run: worker.ts and everything it
 * imports (zod included) bundled by rolldown (which ships with vite) into a single ES module that needs no
 * node_modules and no TypeScript loader at run time. It is installed outside the checkout (spawn/dev-libexec.ts:
 * `/var/lib/computer/libexec/<sha16 of the bundle>/files-worker.mjs` as root), since the agent user may not be
 * able to enter the checkout (`/root` is 0700). Bundling takes a fraction of a second, once per agent process.
 * The image runs the compiled `dist/.../worker.js` instead and never loads this module's bundler.
 */
import fs from 'node:fs';
import path from 'node:path';
import { contentKey, devLibexecBase, installArtifact } from '../spawn/dev-libexec.js';

export const WORKER_BUNDLE_NAME = 'files-worker.mjs';

/** Bundles `entry` (worker.ts) and installs the bundle; resolves with its path. `checkout`: the repository root. */
export async function buildWorkerBundle(entry: string, checkout: string): Promise<string> {
  const { build } = await import('rolldown');
  const out = await build({
    input: entry,
    platform: 'node',
    write: false,
    logLevel: 'silent',
    output: { format: 'esm', codeSplitting: false },
    // No `// <module path>` comments: the bundle (and so its key) must not depend on where the checkout is.
    experimental: { attachDebugInfo: 'none' },
  });
  const chunks = out.output.filter((o) => o.type === 'chunk');
  const code = chunks[0]?.code;
  if (chunks.length !== 1 || code === undefined) throw new Error(`bundling ${path.basename(entry)} gave ${chunks.length} chunks, not one`);
  return installArtifact({
    base: devLibexecBase(process.getuid?.() ?? 0, checkout),
    key: contentKey([WORKER_BUNDLE_NAME, code]),
    name: WORKER_BUNDLE_NAME,
    mode: 0o644,
    write: (tmp) => fs.writeFileSync(tmp, code, { flag: 'wx' }),
  });
}
