/**
 * computer secrets ls/set/rm. `set` reads the value from stdin (hidden prompt on a terminal) or from a
 * named environment variable, never from argv: argv is visible to every local user in /proc and lands in
 * shell history.
 */
import { SecretName } from '../../../../shared/schemas/secrets.js';
import { JSON_FLAG, machineArg, str, type Command } from '../command.js';
import { UsageError, printJson, table } from '../output.js';
import { readSecret } from '../prompt.js';

export const secretsLs: Command = {
  usage: 'secrets ls MACHINE [--json]',
  summary: "list a machine's secret names (values are never shown)",
  options: { ...JSON_FLAG },
  positionals: ['MACHINE'],
  async run({ values, positionals }, ctx) {
    const m = await machineArg(ctx.client(), positionals[0]!);
    const { data } = await m.listSecrets();
    if (values.json) return printJson(ctx, data);
    ctx.out.write(table(['NAME', 'VERSION', 'DELIVERED', 'UPDATED'], data.map((s) => [s.name, s.version, s.delivered_at, s.updated_at])));
  },
};

export const secretsSet: Command = {
  usage: 'secrets set MACHINE NAME [--from-env VAR]   (value from stdin)',
  summary: 'store a secret; the value is read from stdin or the named environment variable',
  options: { 'from-env': { type: 'string' } },
  positionals: ['MACHINE', 'NAME'],
  async run({ values, positionals }, ctx) {
    const name = SecretName.safeParse(positionals[1]);
    if (!name.success) throw new UsageError('NAME must be upper-case letters, digits and underscores, not starting with a digit', secretsSet.usage);
    const fromEnv = str(values['from-env']);
    let value: string;
    if (fromEnv !== undefined) {
      const v = ctx.env[fromEnv];
      if (v === undefined) throw new UsageError(`the environment variable ${fromEnv} is not set`);
      value = v;
    } else value = await readSecret(`Value for ${name.data}: `, ctx.stdin, ctx.err);
    const m = await machineArg(ctx.client(), positionals[0]!);
    const s = await m.setSecret(name.data, value);
    ctx.out.write(`${s.name}  version ${s.version}\n`);
  },
};

export const secretsRm: Command = {
  usage: 'secrets rm MACHINE NAME',
  summary: 'delete a secret',
  positionals: ['MACHINE', 'NAME'],
  async run({ positionals }, ctx) {
    const m = await machineArg(ctx.client(), positionals[0]!);
    await m.deleteSecret(positionals[1]!);
    ctx.out.write(`deleted ${positionals[1]}\n`);
  },
};
