/**
 * Real container machines behind the real /v1 API, for tests that attack the guest from inside: the
 * container machines rig (substrate-rigs.ts) plus a subscribed tenant and helpers to create a machine,
 * run commands through /v1 exec and see the machine's processes from the host. Create machines once per
 * test file and reuse them; the rig's teardown removes everything.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { containerName, globalArgs, podmanEnv } from '../../control-plane/src/substrate/container/podman-argv.js';
import { until, type MachinesRig } from './machines-rig.js';
import { containerMachinesRig } from './substrate-rigs.js';

export interface ContainerMachineRig {
  rig: MachinesRig;
  substrate: ContainerSubstrate;
  /** The substrate's host directory (it must never show up in a response). */
  root: string;
  tenant: Awaited<ReturnType<MachinesRig['tenant']>>;
  /** Create a running machine and wait until its agent answers exec. */
  machine(name?: string): Promise<string>;
  /** POST /exec with the tenant's full key; throws unless the call itself answered 200. */
  exec(id: string, command: string[], opts?: { user?: 'agent' | 'root'; key?: string }): Promise<{ stdout: string; stderr: string; exit_code: number }>;
  /**
   * The machine's processes as the host sees them (host pids, command lines), for what guest root
   * cannot inspect itself (e.g. the fds of Chromium's non-dumpable processes).
   */
  hostProcesses(id: string): Array<{ pid: number; cmdline: string }>;
}

export async function containerMachineRig(t: { teardown(fn: () => Promise<void> | void): void }): Promise<ContainerMachineRig> {
  const { rig, substrate, root, created } = await containerMachinesRig(t, '/tmp/cps-');
  const tenant = await rig.tenant('pro');

  async function exec(id: string, command: string[], opts: { user?: 'agent' | 'root'; key?: string } = {}) {
    const r = await rig.call('POST', `/v1/machines/${id}/exec`, { key: opts.key ?? tenant.key, body: { command, user: opts.user ?? 'agent', timeout_ms: 30_000 } });
    if (r.status !== 200) throw new Error(`exec ${r.status} ${r.text}`);
    return r.json as { stdout: string; stderr: string; exit_code: number };
  }

  function hostProcesses(id: string) {
    const init = execFileSync('podman', [...globalArgs(substrate.env), 'inspect', '--format', '{{.State.Pid}}', containerName(id)], {
      encoding: 'utf8', env: { ...process.env, ...podmanEnv(substrate.env) },
    }).trim();
    const ns = fs.readlinkSync(`/proc/${init}/ns/pid`);
    const out: Array<{ pid: number; cmdline: string }> = [];
    for (const name of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      try {
        if (fs.readlinkSync(`/proc/${name}/ns/pid`) !== ns) continue;
        out.push({ pid: Number(name), cmdline: fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() });
      } catch {
        /* exited meanwhile */
      }
    }
    return out;
  }

  return {
    rig, substrate, root, tenant, exec, hostProcesses,
    async machine(name = 'sec') {
      const c = await rig.call('POST', '/v1/machines', { key: tenant.key, body: { name } });
      if (c.status !== 201) throw new Error(`create ${c.status} ${c.text}`);
      const id = c.json.id as string;
      created.push(id);
      await until('the agent', 120, async () => {
        const r = await rig.call('POST', `/v1/machines/${id}/exec`, { key: tenant.key, body: { command: ['true'] } });
        return r.status === 200 ? true : r.status === 503 ? null : Promise.reject(new Error(`exec ${r.status} ${r.text}`));
      });
      return id;
    },
  };
}
