/**
 * Opening URLs in Chromium as the agent user. One fixed profile: a second launch on the same
 * profile hands its URL to the running browser through Chromium's process singleton and exits.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { spawnClean } from '../spawn/clean-spawn.js';
import { baseEnv, lookupUser } from '../users.js';

export interface BrowserConfig {
  /** The browser executable (Debian: `chromium`). */
  command: string;
  /** false inside containers, where Chromium's sandbox cannot start (it needs user namespaces). */
  sandbox: boolean;
  userName: string;
}

export const PROFILE_DIR_NAME = '.config/computer-browser';

/** Alive and not a zombie (a killed browser whose parent has not reaped it yet still has a pid). */
function pidAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

const SINGLETON_WAIT_MS = 30_000;

async function waitForSingletonSocket(profile: string, ms: number, alive: () => boolean): Promise<void> {
  const end = Date.now() + ms;
  // existsSync follows the SingletonSocket symlink, so this is true once the socket itself exists.
  while (!fs.existsSync(path.join(profile, 'SingletonSocket')) && alive() && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 50));
  }
}

export class Browser {
  private child: ChildProcess | null = null;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly cfg: BrowserConfig,
    private readonly display: string,
  ) {}

  profileDir(): string {
    const u = lookupUser(this.cfg.userName);
    if (!u) throw new Error('browser user does not exist');
    return path.join(u.home, PROFILE_DIR_NAME);
  }

  /** The pid named by the profile's SingletonLock (`host-pid`), if that process is alive. */
  runningPid(): number | null {
    try {
      const target = fs.readlinkSync(path.join(this.profileDir(), 'SingletonLock'));
      const pid = Number(/-(\d+)$/.exec(target)?.[1]);
      return pid > 0 && pidAlive(pid) ? pid : null;
    } catch {
      return null;
    }
  }

  private running(): boolean {
    const c = this.child;
    if (c && c.exitCode === null && c.signalCode === null) return true;
    return this.runningPid() !== null;
  }

  /** Serialized, so two quick opens cannot both believe they launched the browser. */
  open(url: string, newWindow: boolean): Promise<{ launched: boolean }> {
    const next = this.chain.then(() => this.openNow(url, newWindow));
    this.chain = next.catch(() => {});
    return next;
  }

  private async openNow(url: string, newWindow: boolean): Promise<{ launched: boolean }> {
    const u = lookupUser(this.cfg.userName);
    if (!u) throw new Error('browser user does not exist');
    const launched = !this.running();
    const profile = path.join(u.home, PROFILE_DIR_NAME);
    // The profile directory is left for Chromium to create, as the agent user: root creating or
    // chowning paths inside a home the user controls would follow the user's symlinks.
    // A browser that is still starting has taken the profile lock before it listens on its
    // singleton socket; a URL handed over before that would be lost.
    if (!launched) await waitForSingletonSocket(profile, SINGLETON_WAIT_MS, () => this.running());
    // The image's managed policies (/etc/chromium/policies/managed/computer.json) hide the unsupported-flag
    // bar (--no-sandbox), sign-in, promotions and the password/translate bubbles; a machine stopped with the
    // browser open must not greet the next session with a restore bubble either.
    const args = [`--user-data-dir=${profile}`, '--no-first-run', '--no-default-browser-check', '--password-store=basic', '--hide-crash-restore-bubble'];
    if (!this.cfg.sandbox) args.push('--no-sandbox');
    if (newWindow) args.push('--new-window');
    // `--` keeps a URL from ever being read as a flag.
    args.push('--', url);
    // Through computer-spawn: the browser runs as the agent user and must hold no pty master.
    const { child, started } = spawnClean(this.cfg.command, args, {
      cwd: u.home,
      uid: u.uid,
      gid: u.gid,
      env: baseEnv(u, this.display),
      detached: true,
      // The browser's chatter stays out of the agent's logs.
      stdio: 'ignore',
    });
    await started;
    child.unref();
    if (launched) this.child = child;
    return { launched };
  }
}
