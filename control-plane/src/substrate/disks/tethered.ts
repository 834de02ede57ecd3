/**
 * Commands that write into layer blobs (copies, snapshots, flattening), run so that they die with the control
 * plane. A blob is named in the store's state only once it is complete, and the next start deletes every blob
 * nothing names (LayerStore's sweep); a copy that outlived a control plane killed on its own (a bare `kill -9`
 * of the node process, not of its process group or service) would keep filling a blob while that sweep deletes
 * it. So each such command runs as
 *
 *   setpriv --pdeathsig KILL -- /bin/sh -c GUARD <control plane pid> <command> <args…>
 *
 * setpriv (util-linux) sets PR_SET_PDEATHSIG, which Node cannot: the kernel sends the command SIGKILL while
 * its parent, this process, exits, before anyone can see it gone (and so before a new control plane starts).
 * The setting is made after the fork, so a control plane killed in between would leave a command without it;
 * GUARD therefore checks, after the setting, that its parent is still the control plane that started it, and
 * execs the command only then. Either the parent died first (the check sees another parent: nothing is run),
 * or the setting was in place when it died (the kernel kills the command). No window remains in which a copy
 * runs without its control plane, whatever the process tree, service manager or cgroup layout.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

/** Exit status of a tethered command whose control plane was gone before it ran (it ran nothing). */
export const ORPHANED_EXIT = 125;

/** `$0` is the expected parent pid; field 4 of /proc/<pid>/stat is the parent pid (comm is `sh`: no spaces). */
const GUARD = `read -r _ _ _ ppid _ < /proc/$$/stat && [ "$ppid" = "$0" ] && exec "$@"; exit ${ORPHANED_EXIT}`;

/** The argv (file first) that runs `cmd args` tethered to the process `parentPid` (pure; pinned by a test). */
export function tetheredArgv(parentPid: number, cmd: string, args: readonly string[]): [string, ...string[]] {
  return ['setpriv', '--pdeathsig', 'KILL', '--', '/bin/sh', '-c', GUARD, String(parentPid), cmd, ...args];
}

/** Run `cmd args` tethered to this process; resolves with its output, rejects as execFile does. */
export async function runTethered(cmd: string, args: readonly string[], opts: { maxBuffer?: number } = {}): Promise<{ stdout: string; stderr: string }> {
  const [file, ...argv] = tetheredArgv(process.pid, cmd, args);
  return execFileP(file, argv, { maxBuffer: opts.maxBuffer ?? 1024 * 1024 });
}
