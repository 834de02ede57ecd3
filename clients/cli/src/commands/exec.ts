/** computer exec MACHINE -- cmd … : output written through, the command's exit status passed through. */
import { MAX_EXEC_TIMEOUT_MS } from '../../../../shared/schemas/exec.js';
import { GuestUser } from '../../../../shared/schemas/common.js';
import { int, machineArg, str, type Command } from '../command.js';
import { UsageError } from '../output.js';
import { readAll } from '../prompt.js';

export const exec: Command = {
  usage: 'exec MACHINE [--user agent|root] [--cwd DIR] [--timeout SECONDS] [--stdin] -- COMMAND [ARG…]',
  summary: "run a command; its stdout/stderr are written through and its exit status is computer's",
  options: { user: { type: 'string' }, cwd: { type: 'string' }, timeout: { type: 'string' }, stdin: { type: 'boolean' } },
  positionals: ['MACHINE'],
  async run({ values, positionals, rest }, ctx) {
    if (rest.length === 0) throw new UsageError('give the command after --', exec.usage);
    const user = values.user === undefined ? undefined : GuestUser.safeParse(values.user);
    if (user && !user.success) throw new UsageError('--user must be agent or root');
    const timeout = int(values.timeout, 'timeout', 1, MAX_EXEC_TIMEOUT_MS / 1000);
    const m = await machineArg(ctx.client(), positionals[0]!);
    // stdin only on request: reading it by default would hang scripts whose stdin never closes.
    const stdin = values.stdin ? (await readAll(ctx.stdin)).toString('utf8') : undefined;
    const r = await m.exec({ command: rest, user: user?.data, cwd: str(values.cwd), stdin, timeout_ms: timeout === undefined ? undefined : timeout * 1000 });
    ctx.stdout.write(r.stdout);
    ctx.err.write(r.stderr);
    if (r.stdout_truncated || r.stderr_truncated) ctx.err.write('computer: output was truncated at 1 MiB per stream\n');
    if (r.timed_out) ctx.err.write(`computer: the command timed out${r.signal ? ` (${r.signal})` : ''}\n`);
    return r.exit_code;
  },
};
