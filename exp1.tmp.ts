import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { ContainerSubstrate } from '/work/wt-ctsec/control-plane/src/substrate/container/driver.js';
import { containerName, globalArgs, podmanEnv } from '/work/wt-ctsec/control-plane/src/substrate/container/podman-argv.js';
import { testImage } from '/work/wt-ctsec/test/helpers/substrate-image.js';
const run = promisify(execFile);
const image = await testImage('container');
const root = fs.mkdtempSync('/tmp/cx-');
const sub = new ContainerSubstrate({ root, baseRootfs: image.rootfs });
const sh = async (id: string, s: string) => { try { return (await run('podman', [...globalArgs(sub.env), 'exec', containerName(id), 'bash', '-c', s], { env: { ...process.env, ...podmanEnv(sub.env) } })).stdout; } catch (e: any) { return 'ERR ' + e.stdout + e.stderr; } };
try {
  await sub.create({ id: 'e1', resources: { vcpu: 1, memory_mb: 512, disk_gb: 1 }, source: { kind: 'base' }, token: 'x'.repeat(32), network: 'outbound' });
  console.log(await sh('e1', process.argv[2] ?? 'grep Cap /proc/1/status; cat /etc/hosts /etc/hostname; cat /proc/self/mountinfo; cat /proc/self/cgroup; env; cat /proc/1/environ | tr "\\0" "\\n"'));
} finally {
  await sub.destroy('e1').catch(() => {}); await sub.releaseMounts(); fs.rmSync(root, { recursive: true, force: true }); fs.rmSync(sub.env.runDir!, { recursive: true, force: true });
}
