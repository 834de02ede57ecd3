/** computer machines ls/create/start/stop/rm */
import { JSON_FLAG, allPages, machineArg, str, type Command } from '../command.js';
import { UsageError, printJson, table, type Io } from '../output.js';
import { MachineSize, type Machine } from '../../../../shared/schemas/machine.js';

function printMachine(io: Io, m: Machine, json: boolean): void {
  if (json) printJson(io, m);
  else io.out.write(`${m.id}  ${m.name}  ${m.state}\n`);
}

export const machinesLs: Command = {
  usage: 'machines ls [--state STATE] [--json]',
  summary: 'list machines',
  options: { ...JSON_FLAG, state: { type: 'string' } },
  positionals: [],
  async run({ values }, ctx) {
    const cx = ctx.client();
    const all = await allPages((cursor) => cx.listMachines({ limit: 200, cursor, state: str(values.state) }));
    if (values.json) return printJson(ctx, all);
    ctx.out.write(table(['ID', 'NAME', 'STATE', 'SIZE', 'CREATED'], all.map((m) => [m.id, m.name, m.state, m.size, m.created_at])));
  },
};

export const machinesCreate: Command = {
  usage: 'machines create [--name NAME] [--size SIZE] [--template TEMPLATE] [--region REGION] [--stopped] [--json]',
  summary: 'create a machine (started unless --stopped); prints its id',
  options: { ...JSON_FLAG, name: { type: 'string' }, size: { type: 'string' }, template: { type: 'string' }, region: { type: 'string' }, stopped: { type: 'boolean' } },
  positionals: [],
  async run({ values }, ctx) {
    const cx = ctx.client();
    const size = values.size === undefined ? undefined : MachineSize.safeParse(values.size);
    if (size && !size.success) throw new UsageError(`--size must be one of ${MachineSize.options.join(', ')}`);
    const h = await cx.createMachine({
      name: str(values.name),
      size: size?.data,
      template: str(values.template),
      region: str(values.region),
      start: !values.stopped,
    });
    if (values.json) return printJson(ctx, h.record);
    ctx.out.write(`${h.id}\n`);
  },
};

function lifecycle(verb: 'start' | 'stop'): Command {
  return {
    usage: `machines ${verb} MACHINE [--json]`,
    summary: `${verb} a machine`,
    options: { ...JSON_FLAG },
    positionals: ['MACHINE'],
    async run({ values, positionals }, ctx) {
      const m = await machineArg(ctx.client(), positionals[0]!);
      printMachine(ctx, verb === 'start' ? await m.start() : await m.stop(), !!values.json);
    },
  };
}
export const machinesStart = lifecycle('start');
export const machinesStop = lifecycle('stop');

export const machinesRm: Command = {
  usage: 'machines rm MACHINE',
  summary: 'delete a machine and its disk',
  positionals: ['MACHINE'],
  async run({ positionals }, ctx) {
    const m = await machineArg(ctx.client(), positionals[0]!);
    await m.delete();
    ctx.out.write(`deleted ${m.id}\n`);
  },
};
