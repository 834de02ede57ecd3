/**
 * Fault drills on the container substrate: podman as the control plane's substrate runs it (same private
 * configuration), the container's conmon, and waiting for a machine to reach a state through /v1.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { containerName, globalArgs, podmanEnv } from '../../control-plane/src/substrate/container/podman-argv.js';
import { makeMachinesRig, until, type MachinesRig } from './machines-rig.js';
import { childDatabaseEnv } from './rig-db.js';
import { testImage } from './substrate-image.js';

const execFileP = promisify(execFile);

/** podman with the substrate's own configuration (what an operator or another process would do by hand). */
export async function podmanOf(s: ContainerSubstrate, ...args: string[]): Promise<string> {
  const r = await execFileP('podman', [...globalArgs(s.env), ...args], { env: { ...process.env, ...podmanEnv(s.env) } });
  return r.stdout.trim();
}

/** `podman kill` (SIGKILL) of a machine's container from outside the control plane. */
export async function killContainer(s: ContainerSubstrate, id: string): Promise<void> {
  await podmanOf(s, 'kill', containerName(id));
}

/** SIGKILL of the container's monitor process (conmon). */
export async function killConmon(s: ContainerSubstrate, id: string): Promise<number> {
  const pid = Number(await podmanOf(s, 'inspect', '--format', '{{.State.ConmonPid}}', containerName(id)));
  if (!(pid > 1)) throw new Error(`no conmon pid for ${id}`);
  process.kill(pid, 'SIGKILL');
  return pid;
}

/** The container's state as podman reports it (null: no container). */
export async function podmanState(s: ContainerSubstrate, id: string): Promise<string | null> {
  try {
    return await podmanOf(s, 'inspect', '--format', '{{.State.Status}}', containerName(id));
  } catch {
    return null;
  }
}

/** Polls GET /v1/machines/{id} until its state is one of `states` (about a minute at most). */
export async function machineState(rig: MachinesRig, key: string, id: string, states: string[], tries = 120): Promise<string> {
  return until(`machine ${id} in ${states.join('/')}`, tries, async () => {
    const r = await rig.call('GET', `/v1/machines/${id}`, { key });
    return states.includes(r.json?.state) ? (r.json.state as string) : null;
  });
}

/** The machine's events, oldest first, as `type` + data. */
export async function eventsOf(rig: MachinesRig, key: string, id: string): Promise<Array<{ type: string; data: any }>> {
  const r = await rig.call('GET', `/v1/machines/${id}/events?limit=100`, { key });
  if (r.status !== 200) throw new Error(`events ${r.status} ${r.text}`);
  return (r.json.data as Array<{ type: string; data: any }>).slice().reverse();
}

/** Runs `true` in the machine until the agent answers (it restarts with the guest). */
export async function agentAnswers(rig: MachinesRig, key: string, id: string, tries = 240): Promise<void> {
  await until('the agent', tries, async () => {
    const r = await rig.call('POST', `/v1/machines/${id}/exec`, { key, body: { command: ['true'] } });
    if (r.status === 200) return true;
    if (r.status !== 503) throw new Error(`exec: ${r.status} ${r.text}`);
    return null;
  });
}

/**
 * A control plane that can be "restarted": the machines rig and a container substrate reopened on the same data
 * directory and substrate root (new objects, so nothing survives in memory), and a crash drill that runs one
 * /v1 call in a child control plane killed at a named fault point.
 */
export async function restartableContainerRig(t: { teardown(fn: () => Promise<void> | void): void }, opts: { disks?: 'auto' | 'copy' } = {}) {
  const image = await testImage('container');
  const root = fs.mkdtempSync('/tmp/cpk-');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-crash-'));
  const open = async () => {
    const substrate = new ContainerSubstrate({ root, baseRootfs: image.rootfs, stopTimeoutMs: 5000, ...(opts.disks ? { disks: opts.disks } : {}) });
    const rig = await makeMachinesRig({ substrate, dir, services: { readyProbe: false, agentTimeouts: { connectMs: 5000, requestMs: 60_000 } } });
    return { substrate, rig };
  };
  const cur = await open();
  const self = {
    root, dir, ...cur,
    /** Close this control plane (nothing runs the reconciler) and open a new one on the same state. */
    async restart(): Promise<void> {
      await self.rig.close({ keepDir: true });
      Object.assign(self, await open());
    },
    /**
     * Runs `method path` in a child control plane killed at `point`; then this one is reopened (`beforeReopen`
     * looks at what the dead one left, before a new control plane touches it).
     */
    async crashAt(
      point: string, key: string, method: string, p: string, body?: unknown, beforeReopen?: () => void | Promise<void>, child0: { warm?: boolean } = {},
    ): Promise<{ signal: string | null; out: string }> {
      await self.rig.close({ keepDir: true });
      const child = spawn(process.execPath, ['--import=@tapjs/typescript/import', CRASH_CHILD, JSON.stringify({ dir, root, rootfs: image.rootfs, disks: opts.disks, key, method, path: p, body, ...child0 })], {
        env: { ...process.env, COMPUTER_FAULT_POINT: point, ...(await childDatabaseEnv(dir)) }, stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (b: Buffer) => (out += b.toString()));
      const [, signal] = (await once(child, 'exit')) as [number | null, string | null];
      await beforeReopen?.();
      Object.assign(self, await open());
      return { signal, out };
    },
  };
  t.teardown(async () => {
    for (const m of await self.rig.store.machines.inStates(['creating', 'starting', 'running', 'stopping', 'stopped', 'error', 'deleting'])) {
      await self.substrate.destroy(m.id).catch(() => {});
    }
    await self.rig.close();
    await self.substrate.removeNetwork().catch(() => {});
    await self.substrate.releaseMounts();
    fs.rmSync(root, { recursive: true, force: true });
  });
  return self;
}

const CRASH_CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'crash-child.ts');

/** The blobs (layers and writable disks) in a container substrate root's layer store. */
export function blobsIn(root: string): string[] {
  return fs.readdirSync(path.join(root, 'disks', 'blobs')).sort();
}
