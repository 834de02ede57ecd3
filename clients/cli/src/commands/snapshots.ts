/** computer snapshots ls/create/rm, fork, restore */
import { JSON_FLAG, allPages, machineArg, str, type Command } from '../command.js';
import { printJson, table } from '../output.js';

export const snapshotsLs: Command = {
  usage: 'snapshots ls [--machine MACHINE] [--json]',
  summary: 'list snapshots',
  options: { ...JSON_FLAG, machine: { type: 'string' } },
  positionals: [],
  async run({ values }, ctx) {
    const cx = ctx.client();
    const machine = str(values.machine);
    const machine_id = machine === undefined ? undefined : (await machineArg(cx, machine)).id;
    const all = await allPages((cursor) => cx.listSnapshots({ limit: 200, cursor, machine_id }));
    if (values.json) return printJson(ctx, all);
    ctx.out.write(table(['ID', 'NAME', 'MACHINE', 'STATE', 'ORIGIN', 'SIZE', 'CREATED'], all.map((s) => [s.id, s.name, s.machine_id, s.state, s.origin, s.size_bytes, s.created_at])));
  },
};

export const snapshotsCreate: Command = {
  usage: 'snapshots create MACHINE [--name NAME] [--no-wait] [--json]',
  summary: 'capture the disk of a machine (waits until ready unless --no-wait); prints the snapshot id',
  options: { ...JSON_FLAG, name: { type: 'string' }, 'no-wait': { type: 'boolean' } },
  positionals: ['MACHINE'],
  async run({ values, positionals }, ctx) {
    const cx = ctx.client();
    const m = await machineArg(cx, positionals[0]!);
    const s = await cx.createSnapshot(m.id, { name: str(values.name), wait: !values['no-wait'] });
    if (values.json) return printJson(ctx, s);
    ctx.out.write(`${s.id}\n`);
    if (s.state === 'error') ctx.err.write(`error: the capture of ${s.id} failed\n`);
    else if (s.state === 'pending') ctx.err.write(`${s.id} is capturing (see \`computer snapshots ls\`)\n`);
    return s.state === 'error' ? 1 : 0;
  },
};

export const snapshotsRm: Command = {
  usage: 'snapshots rm SNAPSHOT',
  summary: 'delete a snapshot',
  positionals: ['SNAPSHOT'],
  async run({ positionals }, ctx) {
    await ctx.client().deleteSnapshot(positionals[0]!);
    ctx.out.write(`deleted ${positionals[0]}\n`);
  },
};

export const fork: Command = {
  usage: 'fork MACHINE [--snapshot SNAPSHOT] [--name NAME] [--json]',
  summary: "a new machine from a snapshot of MACHINE, or from its disk as it is now; prints the new machine's id",
  options: { ...JSON_FLAG, snapshot: { type: 'string' }, name: { type: 'string' } },
  positionals: ['MACHINE'],
  async run({ values, positionals }, ctx) {
    const m = await machineArg(ctx.client(), positionals[0]!);
    const f = await m.fork({ snapshot_id: str(values.snapshot), name: str(values.name) });
    if (values.json) return printJson(ctx, f.record);
    ctx.out.write(`${f.id}\n`);
  },
};

export const restore: Command = {
  usage: 'restore MACHINE SNAPSHOT [--json]',
  summary: "put MACHINE's disk back to SNAPSHOT (the current disk is kept as a `restore` snapshot)",
  options: { ...JSON_FLAG },
  positionals: ['MACHINE', 'SNAPSHOT'],
  async run({ values, positionals }, ctx) {
    const m = await machineArg(ctx.client(), positionals[0]!);
    const r = await m.restore(positionals[1]!);
    if (values.json) return printJson(ctx, r);
    ctx.out.write(`${r.id}  ${r.state}\n`);
  },
};
