import fs from 'node:fs';
import type { GuestUser } from '../../shared/schemas/common.js';

export interface UserInfo {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

/** Look a user up in /etc/passwd (Node has no getpwnam). Returns null when absent. */
export function lookupUser(name: string, passwdFile = '/etc/passwd'): UserInfo | null {
  const text = fs.readFileSync(passwdFile, 'utf8');
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length >= 7 && f[0] === name) {
      return { name, uid: Number(f[2]), gid: Number(f[3]), home: f[5] || '/', shell: f[6] || '/bin/sh' };
    }
  }
  return null;
}

/**
 * Resolve the guest user a piece of work runs as. `agent` is the unprivileged desktop user;
 * `root` only when the caller asks for it.
 */
export function guestUser(user: GuestUser, agentUserName = 'agent'): UserInfo {
  const name = user === 'root' ? 'root' : agentUserName;
  const info = lookupUser(name);
  if (!info) throw new Error(`guest user ${name} does not exist`);
  return info;
}

/** The environment a process started for `u` sees (no variable of the agent's own leaks in). */
export function baseEnv(u: UserInfo, display?: string): Record<string, string> {
  const env: Record<string, string> = {
    HOME: u.home,
    USER: u.name,
    LOGNAME: u.name,
    SHELL: u.shell,
    PATH: u.uid === 0 ? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' : '/usr/local/bin:/usr/bin:/bin',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
  };
  if (display) env.DISPLAY = display;
  return env;
}
