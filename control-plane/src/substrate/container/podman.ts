/**
 * The podman CLI of one substrate root: every call carries the root's own storage and run directories
 * (podman-argv.ts), and a failure's stderr, which can name host paths, goes to the error's cause, never its
 * message.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ERRORS } from '../../errors.js';
import { containerName, globalArgs, podmanEnv, type PodmanEnv } from './podman-argv.js';

const execFileP = promisify(execFile);

export interface PodmanResult {
  code: number;
  stdout: string;
  stderr: string;
}

export class Podman {
  constructor(readonly env: PodmanEnv) {}

  async run(args: string[], opts: { allowFail?: boolean } = {}): Promise<PodmanResult> {
    try {
      const r = await execFileP('podman', [...globalArgs(this.env), ...args], {
        env: { ...process.env, ...podmanEnv(this.env) },
        maxBuffer: 16 * 1024 * 1024,
      });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (e) {
      const err = e as { code?: number; stdout?: string; stderr?: string };
      if (opts.allowFail) return { code: typeof err.code === 'number' ? err.code : 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
      // podman's stderr can name paths; it goes to the cause, not the message.
      throw ERRORS.podmanFailed(args[0], e);
    }
  }

  /** A machine's container's state and cgroup; null when podman has no such container. */
  async inspect(id: string): Promise<{ status: string; cgroup: string } | null> {
    const r = await this.run(['inspect', '--format', '{{.State.Status}} {{.State.CgroupPath}}', containerName(id)], { allowFail: true });
    if (r.code !== 0) return null;
    const [status = '', cgroup = ''] = r.stdout.trim().split(' ');
    return { status, cgroup };
  }

  async state(id: string): Promise<string | null> {
    return (await this.inspect(id))?.status ?? null;
  }
}
