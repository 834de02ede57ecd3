/**
 * Container networking: `none` has no interface but loopback; `outbound` uses podman's bridge and the host
 * guard keeps the host's own services unreachable. There is no internet here, so only the host side is
 * tested. A control run without the guard's jump rule proves the probe can see a reachable service.
 * The probe server binds only to the bridge's gateway address (reachable from containers, not the network).
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { ContainerSubstrate } from '../../control-plane/src/substrate/container/driver.js';
import { DEFAULT_BRIDGE, GUARD_CHAIN, guardRules, installHostGuard } from '../../control-plane/src/substrate/container/host-guard.js';
import { containerName, globalArgs, podmanEnv } from '../../control-plane/src/substrate/container/podman-argv.js';
import { testImage } from '../helpers/substrate-image.js';

const run = promisify(execFile);
const res = { vcpu: 1, memory_mb: 512, disk_gb: 1 };


// Longer than the suite's per-file timeout: a first run builds the image (~2 min).
t.setTimeout(900_000);
t.test('guard rules are pinned', async (t) => {
  t.same(guardRules('cni-podman0'), [
    ['-w', '-N', 'COMPUTER-GUARD'],
    ['-w', '-F', 'COMPUTER-GUARD'],
    ['-w', '-A', 'COMPUTER-GUARD', '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT'],
    ['-w', '-A', 'COMPUTER-GUARD', '-j', 'DROP'],
    ['-w', '-I', 'INPUT', '1', '-i', 'cni-podman0', '-j', 'COMPUTER-GUARD'],
  ]);
});

t.test('outbound machines cannot reach host services; none has no network', { timeout: 900_000 }, async (t) => {
  const image = await testImage('container');
  const root = fs.mkdtempSync('/tmp/cn-');
  const sub = new ContainerSubstrate({ root, baseRootfs: image.rootfs });
  const env = sub.env;
  const inGuest = async (id: string, script: string): Promise<{ code: number; out: string }> => {
    try {
      const r = await run('podman', [...globalArgs(env), 'exec', containerName(id), 'bash', '-c', script], { env: { ...process.env, ...podmanEnv(env) } });
      return { code: 0, out: r.stdout };
    } catch (e) {
      const err = e as { code: number; stdout: string };
      return { code: err.code, out: err.stdout };
    }
  };
  let server: net.Server | null = null;
  t.teardown(async () => {
    server?.close();
    for (const id of ['mch_net1', 'mch_net2']) await sub.destroy(id).catch(() => {});
    await sub.releaseMounts();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(env.runDir!, { recursive: true, force: true });
    await installHostGuard().catch(() => {});
  });

  await sub.create({ id: 'mch_net1', resources: res, source: { kind: 'base' }, token: 'n'.repeat(32), network: 'outbound' });
  const addr = await inGuest('mch_net1', "ip -4 -o addr show dev eth0 | awk '{print $4}'; ip route | awk '/default/{print $3}'");
  const [cidr, gateway] = addr.out.trim().split('\n');
  t.match(cidr, /^\d+\.\d+\.\d+\.\d+\/\d+$/, 'outbound machine has a bridge address');
  t.match(gateway, /^\d+\.\d+\.\d+\.\d+$/, 'and a default route');

  server = net.createServer((s) => s.end('host-service\n'));
  await new Promise<void>((r) => server!.listen(0, gateway, () => r()));
  const port = (server.address() as net.AddressInfo).port;
  const probe = `timeout 3 bash -c 'cat < /dev/tcp/${gateway}/${port}'`;

  // control: without the guard's jump, the host service at the gateway address answers
  await run('iptables', ['-w', '-D', 'INPUT', '-i', DEFAULT_BRIDGE, '-j', GUARD_CHAIN]);
  const open = await inGuest('mch_net1', probe);
  t.equal(open.out, 'host-service\n', 'control: reachable without the guard');

  await installHostGuard();
  const blocked = await inGuest('mch_net1', probe);
  t.not(blocked.code, 0, 'with the guard the host service is unreachable');
  t.equal(blocked.out, '');
  const rules = (await run('iptables', ['-w', '-S', 'INPUT'])).stdout;
  // The guard chain is shared with the vm substrate's bridge: count this bridge's jump only.
  const jump = `-A INPUT -i ${DEFAULT_BRIDGE} -j ${GUARD_CHAIN}`;
  t.equal(rules.split('\n').filter((l) => l === jump).length, 1, 'exactly one jump to the guard');
  await installHostGuard();
  t.equal((await run('iptables', ['-w', '-S', 'INPUT'])).stdout.split('\n').filter((l) => l === jump).length, 1, 'installing again is idempotent');

  await sub.create({ id: 'mch_net2', resources: res, source: { kind: 'base' }, token: 'n'.repeat(32) });
  const links = await inGuest('mch_net2', "ip -o link | awk -F': ' '{print $2}'");
  t.same(links.out.trim().split('\n'), ['lo'], 'network none: loopback only');
  t.not((await inGuest('mch_net2', probe)).code, 0);
});
