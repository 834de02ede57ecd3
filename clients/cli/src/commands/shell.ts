/**
 * computer shell MACHINE [-- COMMAND…]: the local terminal attached to a new pty in the machine over the
 * gateway's terminal channel. Raw mode while attached (so Ctrl-C, arrows and editing keys reach the remote
 * program), the remote size following SIGWINCH, the local terminal restored on every exit path, and the
 * remote program's exit status as computer's own.
 */
import { GuestUser } from '../../../../shared/schemas/common.js';
import { MAX_PTY_COLS, MAX_PTY_ROWS } from '../../../../shared/schemas/pty.js';
import { machineArg, str, type Command } from '../command.js';
import { UsageError } from '../output.js';

const clamp = (v: number | undefined, max: number, dflt: number) => Math.min(max, Math.max(1, v ?? dflt));

export const shell: Command = {
  usage: 'shell MACHINE [--user agent|root] [--cwd DIR] [-- COMMAND [ARG…]]',
  summary: "attach this terminal to a shell (or COMMAND) in the machine; exits with the remote program's status",
  options: { user: { type: 'string' }, cwd: { type: 'string' } },
  positionals: ['MACHINE'],
  async run({ values, positionals, rest }, ctx) {
    const user = values.user === undefined ? undefined : GuestUser.safeParse(values.user);
    if (user && !user.success) throw new UsageError('--user must be agent or root');
    const { stdin, stdout } = ctx;
    const size = () => ({ cols: clamp(stdout.columns, MAX_PTY_COLS, 80), rows: clamp(stdout.rows, MAX_PTY_ROWS, 24) });
    const m = await machineArg(ctx.client(), positionals[0]!);
    const term = await m.openTerminal({
      ...size(),
      command: rest.length ? rest : undefined,
      user: user?.data,
      cwd: str(values.cwd),
      env: { TERM: ctx.env.TERM && /^[A-Za-z0-9._+-]{1,64}$/.test(ctx.env.TERM) ? ctx.env.TERM : 'xterm-256color' },
    });
    const t = await m.attachTerminal(term.id);

    const raw = stdin.isTTY;
    const onInput = (d: Buffer) => t.write(d);
    const onResize = () => {
      const s = size();
      t.resize(s.cols, s.rows);
    };
    // Node refreshes stdout.columns/rows on SIGWINCH and then emits 'resize'.
    const resizeSource = stdout.isTTY ? stdout : null;
    const restore = () => {
      stdin.off('data', onInput);
      resizeSource?.off('resize', onResize);
      if (raw) stdin.setRawMode(false);
      stdin.pause();
      for (const sig of ['SIGTERM', 'SIGHUP'] as const) process.off(sig, onSignal);
    };
    function onSignal() {
      restore();
      t.detach();
    }
    for (const sig of ['SIGTERM', 'SIGHUP'] as const) process.on(sig, onSignal);
    t.on('data', (d: Buffer) => stdout.write(d));
    if (raw) stdin.setRawMode(true);
    stdin.on('data', onInput);
    stdin.resume();
    resizeSource?.on('resize', onResize);
    try {
      const code = await t.exited;
      // Let the last output reach the terminal before the exit status ends the process.
      await new Promise<void>((r) => stdout.write('', () => r()));
      return code ?? 1;
    } finally {
      restore();
    }
  },
};
