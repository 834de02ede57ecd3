/** computer ports ls/publish/rm */
import { GuestPort } from '../../../../shared/schemas/ports.js';
import { JSON_FLAG, allPages, machineArg, str, type Command } from '../command.js';
import { UsageError, printJson, table } from '../output.js';

export const portsLs: Command = {
  usage: 'ports ls MACHINE [--json]',
  summary: "list a machine's published ports",
  options: { ...JSON_FLAG },
  positionals: ['MACHINE'],
  async run({ values, positionals }, ctx) {
    const m = await machineArg(ctx.client(), positionals[0]!);
    const all = await allPages((cursor) => m.listPorts({ limit: 200, cursor }));
    if (values.json) return printJson(ctx, all);
    ctx.out.write(table(['ID', 'PORT', 'ACCESS', 'NAME', 'URL'], all.map((p) => [p.id, p.port, p.access, p.name, p.url])));
  },
};

export const portsPublish: Command = {
  usage: 'ports publish MACHINE PORT [--public] [--name NAME] [--json]',
  summary: 'serve a port of the machine on its own URL (private unless --public)',
  options: { ...JSON_FLAG, public: { type: 'boolean' }, name: { type: 'string' } },
  positionals: ['MACHINE', 'PORT'],
  async run({ values, positionals }, ctx) {
    const port = GuestPort.safeParse(Number(positionals[1]));
    if (!/^\d+$/.test(positionals[1]!) || !port.success) throw new UsageError('PORT must be 1-65535', portsPublish.usage);
    const m = await machineArg(ctx.client(), positionals[0]!);
    const p = await m.publishPort({ port: port.data, name: str(values.name) ?? null, access: values.public ? 'public' : 'private' });
    if (values.json) return printJson(ctx, p);
    ctx.out.write(`${p.id}  ${p.url}\n`);
    // Shown once by the server: the caller's own credential for this preview.
    if (p.secret) ctx.out.write(`secret: ${p.secret}   (send as Authorization: Bearer …; shown only now)\n`);
    if (p.access_url) ctx.out.write(`browser link (one use): ${p.access_url}\n`);
  },
};

export const portsRm: Command = {
  usage: 'ports rm MACHINE PREVIEW_ID',
  summary: 'unpublish a port',
  positionals: ['MACHINE', 'PREVIEW_ID'],
  async run({ positionals }, ctx) {
    const m = await machineArg(ctx.client(), positionals[0]!);
    await m.unpublishPort(positionals[1]!);
    ctx.out.write(`unpublished ${positionals[1]}\n`);
  },
};
