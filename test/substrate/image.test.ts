import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AGENT_RUNTIME_PACKAGES, baseHash, dependencyClosure, dropStaleMarkers, imageHash, latestCachedImage } from '../../control-plane/src/substrate/image.js';
import { REPO_ROOT } from '../helpers/substrate-image.js';

t.test('the agent runtime closure: sharp with its platform binaries, no better-sqlite3, no dev tools', async (t) => {
  const deps = dependencyClosure(path.join(REPO_ROOT, 'node_modules'), AGENT_RUNTIME_PACKAGES);
  for (const p of ['hono', '@hono/node-server', 'zod', 'node-pty', 'sharp', '@img/sharp-linux-x64', '@img/sharp-libvips-linux-x64']) t.ok(deps.includes(p), p);
  for (const p of ['better-sqlite3', 'tap', 'typescript', '@img/sharp-darwin-arm64']) t.notOk(deps.includes(p), `not ${p}`);
  t.throws(() => dependencyClosure(path.join(REPO_ROOT, 'node_modules'), ['no-such-package-here']), /missing package/);
});

t.test('content hashes follow the recipe and the agent build', async (t) => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'imghash-'));
  t.teardown(() => fs.rmSync(d, { recursive: true, force: true }));
  const repo = path.join(d, 'repo');
  fs.mkdirSync(path.join(repo, 'images', 'initrd'), { recursive: true });
  fs.mkdirSync(path.join(repo, 'images', 'rootfs', 'usr', 'sbin'), { recursive: true });
  fs.writeFileSync(path.join(repo, 'images', 'packages.txt'), 'xvfb\n');
  fs.writeFileSync(path.join(repo, 'images', 'build.sh'), 'echo\n');
  fs.writeFileSync(path.join(repo, 'images', 'initrd', 'init'), '#!/bin/sh\n');
  fs.writeFileSync(path.join(repo, 'images', 'rootfs', 'usr', 'sbin', 'computer-init'), '#!/bin/bash\n');
  const app = path.join(d, 'app');
  fs.mkdirSync(path.join(app, 'dist'), { recursive: true });
  fs.writeFileSync(path.join(app, 'dist', 'main.js'), 'console.log(1)\n');
  const node = path.join(d, 'node');
  fs.writeFileSync(node, 'node-binary-v20');

  const h0 = await imageHash(repo, app, node);
  const b0 = await baseHash(repo);
  // Pinned: what the hashing gave when it read the tree synchronously; reading it in chunks must not move it (the
  // cache, CI's too, is keyed by it).
  t.equal(h0, 'a99d44a2b9f5a60d8f46');
  t.equal(b0, '9cc7af2c362219c4361b');
  t.equal(await imageHash(repo, app, node), h0, 'stable when nothing changes');

  fs.writeFileSync(path.join(app, 'dist', 'main.js'), 'console.log(2)\n');
  const h1 = await imageHash(repo, app, node);
  t.not(h1, h0, 'an agent change changes the image hash');
  t.equal(await baseHash(repo), b0, '...but not the Debian base');

  fs.writeFileSync(path.join(repo, 'images', 'rootfs', 'usr', 'sbin', 'computer-init'), '#!/bin/bash\necho\n');
  const h2 = await imageHash(repo, app, node);
  t.not(h2, h1, 'an init change changes the image hash');
  t.equal(await baseHash(repo), b0, '...but not the Debian base');

  fs.writeFileSync(path.join(repo, 'images', 'packages.txt'), 'xvfb\nopenbox\n');
  t.not(await baseHash(repo), b0, 'a package list change rebuilds the base');
  t.not(await imageHash(repo, app, node), h2);

  fs.writeFileSync(node, 'node-binary-v20.1');
  const h3 = await imageHash(repo, app, node);
  fs.chmodSync(path.join(app, 'dist', 'main.js'), 0o600);
  t.not(await imageHash(repo, app, node), h3, 'file modes are part of the hash');

  const cache = path.join(d, 'cache');
  t.equal(latestCachedImage(cache, 'container'), null);
  fs.mkdirSync(path.join(cache, h3, 'rootfs'), { recursive: true });
  fs.writeFileSync(path.join(cache, h3, 'rootfs.done'), '');
  t.equal(latestCachedImage(cache, 'container'), null, 'a marker beside an empty rootfs is not an image');
  fs.mkdirSync(path.join(cache, h3, 'rootfs', 'etc'));
  t.equal(latestCachedImage(cache, 'container')?.hash, h3);
  t.equal(latestCachedImage(cache, 'all'), null, 'no vm artifacts yet');
  fs.writeFileSync(path.join(cache, h3, 'vm.done'), '');
  t.equal(latestCachedImage(cache, 'all'), null, 'a vm marker without its disk is not a vm image');
  fs.writeFileSync(path.join(cache, h3, 'base.qcow2'), '');
  t.equal(latestCachedImage(cache, 'all')?.hash, h3);
});

t.test('a marker whose part is gone is dropped, so the build makes that part again', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'img-stale-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const has = () => ['rootfs.done', 'vm.done'].filter((m) => fs.existsSync(path.join(dir, m)));
  const logged: string[] = [];
  const log = (l: string) => logged.push(l);
  fs.mkdirSync(path.join(dir, 'rootfs', 'etc'), { recursive: true });
  for (const f of ['rootfs.done', 'vm.done', 'base.qcow2']) fs.writeFileSync(path.join(dir, f), '');
  dropStaleMarkers(dir, log);
  t.same(has(), ['rootfs.done', 'vm.done'], 'a whole image keeps both markers');
  t.same(logged, []);

  fs.rmSync(path.join(dir, 'base.qcow2'));
  dropStaleMarkers(dir, log);
  t.same(has(), ['rootfs.done'], 'a lost VM disk: only its marker goes');
  t.match(logged, [/has lost its VM disk: building it again/]);

  fs.writeFileSync(path.join(dir, 'vm.done'), '');
  fs.rmSync(path.join(dir, 'rootfs', 'etc'), { recursive: true });
  dropStaleMarkers(dir, log);
  t.same(has(), [], 'an emptied rootfs: both go (the VM disk is made from it)');
  t.match(logged[1], /has lost its root filesystem \(no \/etc\): building it again/);
});
