/**
 * The Python SDK (clients/python) against the real control plane served on 127.0.0.1 (API + gateway) with
 * the container substrate and the real guest image, as child processes that fail this file when they fail:
 * the package installed offline into a fresh venv exactly as its README says, `mypy --strict` over the
 * package, its examples and tests, the per-route coverage check against the document this server serves
 * (a /v1 route without its Python method fails), and the pytest suite (one shared machine, plus the fork and
 * the quickstart's own). Needs root, podman, runc and the Debian packages of `setup-host.sh --test`.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { serveOnContainers } from '../helpers/container-served.js';
import { REPO_ROOT } from '../helpers/substrate-image.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_800_000);

const PKG = path.join(REPO_ROOT, 'clients', 'python');
/** Debian's interpreter: where python3-httpx, -websockets, -pytest and mypy are installed (not a pyenv shim). */
const PYTHON = '/usr/bin/python3';

function run(cmd: string, args: string[], o: { cwd?: string; env?: Record<string, string> } = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: o.cwd ?? PKG, env: { ...process.env, ...o.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, out }));
  });
}

/** The child's output only when it failed (tap prints an assertion's message either way). */
const said = (what: string, r: { code: number | null; out: string }) => (r.code === 0 ? what : `${what} exited ${r.code}:\n${r.out}`);

t.test('Python SDK', { timeout: 1_800_000 }, async (t) => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'python-sdk-'));
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
  const venv = path.join(work, 'venv');

  // The README's install, offline: a venv that sees Debian's httpx/websockets, pip without an index.
  const mk = await run(PYTHON, ['-m', 'venv', '--system-site-packages', venv]);
  t.equal(mk.code, 0, said('python3 -m venv --system-site-packages', mk));
  const pip = await run(path.join(venv, 'bin', 'pip'), ['install', '--no-index', '--no-build-isolation', PKG], { cwd: work });
  t.equal(pip.code, 0, said('pip install --no-index --no-build-isolation ./clients/python', pip));
  t.match(pip.out, /Successfully installed computer-sdk-/);

  const mypy = await run(PYTHON, ['-m', 'mypy', '--strict', '--cache-dir', path.join(work, 'mypy-cache'), 'computer', 'codegen.py', 'examples', 'tests']);
  t.equal(mypy.code, 0, said('mypy --strict', mypy));

  const { rig, served } = await serveOnContainers(t, 'python-sdk-');
  const baseUrl = `http://127.0.0.1:${served.port}`;
  const a = await rig.tenant('developer', ['machines:read', 'machines:write', 'machines:control', 'sessions:write', 'snapshots:read', 'snapshots:write', 'ports:read', 'ports:write', 'secrets:write']);

  const coverage = await run(path.join(venv, 'bin', 'python'), [path.join(PKG, 'codegen.py'), '--check', '--url', `${baseUrl}/v1/openapi.json`]);
  t.equal(coverage.code, 0, said('codegen.py --check (every route has its method)', coverage));
  t.match(coverage.out, /coverage: \d+ routes, 0 problems/);

  // From a directory outside the package, so `import computer` is the installed copy.
  const env = { COMPUTER_BASE_URL: baseUrl, COMPUTER_API_KEY: a.key, XDG_CONFIG_HOME: work, PYTHONDONTWRITEBYTECODE: '1' };
  const pytest = await run(path.join(venv, 'bin', 'python'), ['-m', 'pytest', '-p', 'no:cacheprovider', '-q', '-rA', path.join(PKG, 'tests')], { cwd: work, env });
  t.equal(pytest.code, 0, said('pytest', pytest));
  const summary = pytest.out.trim().split('\n').pop() ?? '';
  t.match(summary, /^\d+ passed in [\d.]+s$/, 'every test passed, none skipped, failed or in error');
  t.comment(pytest.out.split('\n').filter((l) => l.startsWith('PASSED') || /passed|failed/.test(l)).join('\n'));
});
