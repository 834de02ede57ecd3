/**
 * A container substrate on a fresh root for tests that act from inside real machines (the guest image and
 * agent, real podman), torn down with everything it made. `guest` runs a shell script in a machine as root
 * (or another user) through `podman exec`, as a tenant's root would.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { ContainerSubstrate, type ContainerSubstrateConfig } from '../../control-plane/src/substrate/container/driver.js';
import { containerName, globalArgs, podmanEnv } from '../../control-plane/src/substrate/container/podman-argv.js';
import { testImage } from './substrate-image.js';

const run = promisify(execFile);

export interface GuestResult {
  code: number;
  out: string;
  err: string;
}

export interface ContainerRig {
  sub: ContainerSubstrate;
  root: string;
  /** Run `script` with bash in machine `id` (as root unless `user` is given). */
  guest(id: string, script: string, opts?: { user?: string }): Promise<GuestResult>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

export async function containerRig(t: Teardown, cfg: Partial<ContainerSubstrateConfig> = {}): Promise<ContainerRig> {
  const image = await testImage('container');
  // Short root: unix socket paths are limited to 107 bytes.
  const root = fs.mkdtempSync('/tmp/sec-');
  const sub = new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000, ...cfg });
  t.teardown(async () => {
    for (const { id } of await sub.reattach().catch(() => [])) await sub.destroy(id).catch(() => {});
    await sub.releaseMounts();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(sub.env.runDir!, { recursive: true, force: true });
  });
  return { sub, root, guest: guestRunner(sub) };
}

/** Runs a bash script in a machine of `sub` (as root unless `user` is given) through `podman exec`. */
export function guestRunner(sub: ContainerSubstrate): ContainerRig['guest'] {
  return async (id, script, opts = {}) => {
    const user = opts.user ? ['--user', opts.user] : [];
    try {
      const r = await run('podman', [...globalArgs(sub.env), 'exec', ...user, containerName(id), 'bash', '-c', script], {
        env: { ...process.env, ...podmanEnv(sub.env) },
        maxBuffer: 16 * 1024 * 1024,
        // A hang guard well inside the test timeouts, so a wedged exec fails the test and teardown still runs.
        timeout: 300_000,
      });
      return { code: 0, out: r.stdout, err: r.stderr };
    } catch (e) {
      const err = e as { code?: number; stdout?: string; stderr?: string };
      return { code: typeof err.code === 'number' ? err.code : 1, out: err.stdout ?? '', err: err.stderr ?? '' };
    }
  };
}
