/**
 * The guest image for substrate tests: built on first use (cached by content hash under
 * $COMPUTER_IMAGE_CACHE or ~/.cache/computer/images), so CI pays the build once.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultImageCacheDir, ensureImage, type GuestImage, type ImageArtifacts } from '../../control-plane/src/substrate/image.js';
import type { EarlyChannel } from '../../control-plane/src/substrate/substrate.js';
import { enrollOver } from './agent-enrollment.js';
import { H2Client } from './h2-client.js';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * COMPUTER_TEST_IMAGE_DIR points at a prebuilt image directory (rootfs/, vmlinuz, initrd.img, base.qcow2)
 * to debug against instead of the recipe's build.
 */
export async function testImage(artifacts: ImageArtifacts, log: (l: string) => void = (l) => process.stderr.write(`# ${l}\n`)): Promise<GuestImage> {
  const dir = process.env.COMPUTER_TEST_IMAGE_DIR;
  if (dir)
    return { hash: 'prebuilt', dir, rootfs: path.join(dir, 'rootfs'), kernel: path.join(dir, 'vmlinuz'), initrd: path.join(dir, 'initrd.img'), baseDisk: path.join(dir, 'base.qcow2') };
  return ensureImage({ repoRoot: REPO_ROOT, cacheDir: process.env.COMPUTER_IMAGE_CACHE || defaultImageCacheDir(), artifacts, log });
}

/**
 * Enroll the machine's agent with `key` the way AgentPool does, then poll its /health over the channel socket
 * until it answers 200 (or the deadline passes).
 */
export async function waitForAgent(sub: EarlyChannel, id: string, key: string, timeoutMs: number): Promise<{ client: H2Client; health: any }> {
  const end = Date.now() + timeoutMs;
  let last: unknown = null;
  while (Date.now() < end) {
    const c = new H2Client(sub.channelPath(id), key);
    try {
      const r = await Promise.race([
        (async () => {
          const enrolled = await enrollOver(c, key, () => sub.issueEnrollment(id));
          return enrolled === 204 ? c.request('GET', '/health') : { status: enrolled, json: (): unknown => null };
        })(),
        new Promise<never>((_, rej) => setTimeout(() => rej(new Error('health timeout')), 5000)),
      ]);
      if (r.status === 200) return { client: c, health: r.json() };
      last = `status ${r.status}`;
    } catch (e) {
      last = e;
    }
    c.session.destroy();
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`agent not ready: ${String(last)}`);
}
