/**
 * A real, throwaway PostgreSQL cluster (per test file, or per `npm run bench` store part): `initdb` in a temp dir as an unprivileged user (Debian's
 * `postgres` when the test runs as root, else the test's own user), listening only on a unix socket in that dir
 * (no TCP), one database created, stopped and removed on teardown.
 *
 * A test process killed before its teardown leaves its cluster behind: every start first sweeps clusters whose
 * owning test process is gone (the pid recorded in `owner.pid`), so they never pile up.
 *
 * Lives under scripts/lib/ (dev tooling, compiled by `tsc -p tsconfig.json`, never shipped in the control plane)
 * so that both the tests (test/helpers/postgres.ts re-exports it unchanged) and scripts/bench/store.ts can use it;
 * test/ is outside the bench's build, and control-plane/src/ is for code the service runs.
 */
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Debian's PostgreSQL binaries (package `postgresql`, installed by scripts/setup-host.sh --test). */
export const PG_BIN = process.env.PG_BIN ?? firstExisting(['/usr/lib/postgresql/17/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/15/bin']);
const PREFIX = 'pg-rig-';
const DATABASE = 'computer';

export interface TestPostgres {
  /** `postgres://postgres@/computer?host=<socket dir>`: what DATABASE_URL is set to. */
  url: string;
  /** The cluster's directory (data in `data/`, the socket in the directory itself). */
  dir: string;
  /** A URL for another, freshly created database on the same cluster. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

function firstExisting(dirs: string[]): string {
  return dirs.find((d) => fs.existsSync(path.join(d, 'initdb'))) ?? dirs[dirs.length - 1];
}

/** The argv prefix that runs a PostgreSQL binary as the cluster's owner. */
function asOwner(): string[] {
  return process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--'] : [];
}

async function pg(bin: string, args: string[]): Promise<string> {
  const [cmd, ...rest] = [...asOwner(), path.join(PG_BIN, bin), ...args];
  const { stdout } = await run(cmd, rest, { encoding: 'utf8' });
  return stdout;
}

function pgSync(bin: string, args: string[]): void {
  const [cmd, ...rest] = [...asOwner(), path.join(PG_BIN, bin), ...args];
  try {
    execFileSync(cmd, rest, { stdio: 'ignore', timeout: 30_000 });
  } catch {
    /* already stopped */
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Stops and removes the clusters of test processes that died before their teardown. */
export function sweepStaleClusters(): void {
  for (const name of fs.readdirSync(os.tmpdir())) {
    if (!name.startsWith(PREFIX)) continue;
    const dir = path.join(os.tmpdir(), name);
    const owner = Number(readOr(path.join(dir, 'owner.pid'), '0'));
    if (owner > 0 && alive(owner)) continue;
    // No owner yet: a start in another process between its mkdtemp and its owner.pid; left alone for a minute. Gone
    // meanwhile (its own process removed it): nothing to sweep.
    const made = fs.statSync(dir, { throwIfNoEntry: false })?.mtimeMs;
    if (made === undefined || (owner === 0 && Date.now() - made < 60_000)) continue;
    if (fs.existsSync(path.join(dir, 'data', 'postmaster.pid'))) pgSync('pg_ctl', ['stop', '-D', path.join(dir, 'data'), '-m', 'immediate', '-w']);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function readOr(file: string, fallback: string): string {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return fallback;
  }
}

export function socketUrl(dir: string, database: string): string {
  return `postgres://postgres@/${database}?host=${encodeURIComponent(dir)}`;
}

export interface StartOptions {
  /**
   * Keep PostgreSQL's durability on (fsync, synchronous_commit, full_page_writes: its defaults), so a commit waits
   * for its WAL flush as a production primary's does. Default off: the tests' and most benches' cluster.
   */
  durable?: boolean;
}

/** Starts a cluster; `t.teardown(pg.stop)` (or call stop) removes it. */
export async function startPostgres(o: StartOptions = {}): Promise<TestPostgres> {
  if (!fs.existsSync(path.join(PG_BIN, 'initdb'))) {
    throw new Error(`PostgreSQL is not installed (no ${PG_BIN}/initdb): run scripts/setup-host.sh --test`);
  }
  sweepStaleClusters();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), PREFIX));
  fs.writeFileSync(path.join(dir, 'owner.pid'), String(process.pid));
  const data = path.join(dir, 'data');
  if (process.getuid?.() === 0) execFileSync('chown', ['postgres:', dir]);
  await pg('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8', '--locale=C', '--no-instructions']);
  // No TCP (listen_addresses empty); the socket in the cluster's own dir. Durability is off unless asked: a test
  // cluster never outlives its test, and fsync on a shared host is what would make it slow.
  const opts = [
    `-k ${dir}`,
    `-c listen_addresses=''`,
    ...(o.durable ? [] : ['-c fsync=off -c synchronous_commit=off -c full_page_writes=off']),
    '-c shared_buffers=16MB -c max_connections=60',
  ].join(' ');
  await pg('pg_ctl', ['start', '-D', data, '-w', '-t', '60', '-l', path.join(dir, 'log'), '-o', opts]);
  let stopped = false;
  const stopSync = () => {
    if (stopped) return;
    stopped = true;
    pgSync('pg_ctl', ['stop', '-D', data, '-m', 'immediate', '-w']);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stopSync);
  const createDatabase = async (name: string) => {
    await pg('createdb', ['-h', dir, '-U', 'postgres', name]);
    return socketUrl(dir, name);
  };
  await createDatabase(DATABASE);
  return {
    url: socketUrl(dir, DATABASE),
    dir,
    createDatabase,
    async stop() {
      if (stopped) return;
      process.removeListener('exit', stopSync);
      stopped = true;
      await pg('pg_ctl', ['stop', '-D', data, '-m', 'fast', '-w']).catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
