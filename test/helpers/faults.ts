/**
 * Fault drills on the container substrate: podman as the control plane's substrate runs it (same private
 * configuration), the container's conmon, and waiting for a machine to reach a state through /v1.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { containerName, globalArgs, podmanEnv } from '../../control-plane/src/substrate/container/podman-argv.js';
import { until, type MachinesRig } from './machines-rig.js';

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
