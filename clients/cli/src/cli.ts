/**
 * The `computer` command line: the command table, argument parsing and error rendering (main.ts is the
 * executable). The command-line client, built on the SDK (clients/sdk). Exit status: 0 ok, 1 an error
 * (rendered from the API's envelope), 2 a bad command line; `exec` and `shell` pass the remote
 * program's status through. docs/clients.md.
 */
import { parseArgs } from 'node:util';
import { makeClient, type Command, type Ctx } from './command.js';
import { exec } from './commands/exec.js';
import { cp, screenshot } from './commands/files.js';
import { login } from './commands/login.js';
import { machinesCreate, machinesLs, machinesRm, machinesStart, machinesStop } from './commands/machines.js';
import { portsLs, portsPublish, portsRm } from './commands/ports.js';
import { secretsLs, secretsRm, secretsSet } from './commands/secrets.js';
import { shell } from './commands/shell.js';
import { fork, restore, snapshotsCreate, snapshotsLs, snapshotsRm } from './commands/snapshots.js';
import { EXIT, UsageError, renderError } from './output.js';
import { resolveConfig } from './config.js';

export const COMMANDS: Record<string, Command> = {
  login,
  'machines ls': machinesLs,
  'machines create': machinesCreate,
  'machines start': machinesStart,
  'machines stop': machinesStop,
  'machines rm': machinesRm,
  screenshot,
  exec,
  shell,
  cp,
  'snapshots ls': snapshotsLs,
  'snapshots create': snapshotsCreate,
  'snapshots rm': snapshotsRm,
  fork,
  restore,
  'ports ls': portsLs,
  'ports publish': portsPublish,
  'ports rm': portsRm,
  'secrets ls': secretsLs,
  'secrets set': secretsSet,
  'secrets rm': secretsRm,
};
const ALIASES: Record<string, string> = { list: 'ls', delete: 'rm', remove: 'rm' };

function help(): string {
  const names = Object.entries(COMMANDS).map(([k, c]) => [`${k} ${c.positionals.join(' ')}`.trim(), c.summary] as const);
  const w = Math.max(...names.map(([n]) => n.length));
  return [
    'usage: computer COMMAND [ARGS…]   (computer COMMAND --help for its options)',
    '',
    ...names.map(([n, s]) => `  ${n.padEnd(w)}  ${s}`),
    '',
    'MACHINE is a machine id (mch_…) or name. Credentials: `computer login`, or COMPUTER_API_KEY and',
    'COMPUTER_BASE_URL (default http://127.0.0.1:8080). Listings take --json.',
    '',
  ].join('\n');
}

/** Finds the command, parses its arguments and runs it; answers the exit status. */
export async function runCli(argv: string[], ctx: Ctx): Promise<number> {
  if (argv.length === 0 || argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') {
    (argv.length === 0 ? ctx.err : ctx.out).write(help());
    return argv.length === 0 ? EXIT.usage : EXIT.ok;
  }
  const two = argv.length > 1 ? `${argv[0]} ${ALIASES[argv[1]!] ?? argv[1]}` : '';
  const [key, args] = COMMANDS[two] ? [two, argv.slice(2)] : [argv[0]!, argv.slice(1)];
  const cmd = COMMANDS[key];
  try {
    if (!cmd) throw new UsageError(`unknown command: ${argv.slice(0, 2).join(' ')}; see \`computer help\``);
    // Everything after the first `--` is the remote command, taken verbatim (its own flags included).
    const dash = args.indexOf('--');
    const own = dash < 0 ? args : args.slice(0, dash);
    const rest = dash < 0 ? [] : args.slice(dash + 1);
    let parsed;
    try {
      parsed = parseArgs({ args: own, options: { ...cmd.options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
    } catch (e) {
      throw new UsageError(e instanceof Error ? e.message : String(e), cmd.usage);
    }
    if (parsed.values.help) {
      ctx.out.write(`usage: computer ${cmd.usage}\n  ${cmd.summary}\n`);
      return EXIT.ok;
    }
    const n = parsed.positionals.length;
    if (n > cmd.positionals.length || n < (cmd.minPositionals ?? cmd.positionals.length)) {
      throw new UsageError(`expected ${cmd.positionals.join(' ') || 'no arguments'}`, cmd.usage);
    }
    return (await cmd.run({ values: parsed.values, positionals: parsed.positionals, rest }, ctx)) ?? EXIT.ok;
  } catch (e) {
    let base: string | undefined;
    try {
      base = resolveConfig(ctx.env)?.base_url;
    } catch {
      base = undefined;
    }
    ctx.err.write(renderError(e, base));
    if (e instanceof UsageError && cmd && !e.usage && e.message.startsWith('unknown')) ctx.err.write(help());
    return e instanceof UsageError ? EXIT.usage : EXIT.error;
  }
}
