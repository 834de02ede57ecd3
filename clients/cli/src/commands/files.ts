/** computer cp (both ways) and computer screenshot */
import fs from 'node:fs';
import path from 'node:path';
import { GuestUser } from '../../../../shared/schemas/common.js';
import { int, machineArg, str, type Command } from '../command.js';
import { UsageError } from '../output.js';
import { progressBar } from '../progress.js';

/** `MACHINE:/abs/path` (MACHINE an id or name, no `/`); anything else is a local path. */
export function parseRemote(s: string): { machine: string; path: string } | null {
  const m = /^([^/:]+):(\/.*)$/.exec(s);
  return m ? { machine: m[1]!, path: m[2]! } : null;
}

function userOpt(v: string | boolean | undefined): GuestUser | undefined {
  if (v === undefined) return undefined;
  const r = GuestUser.safeParse(v);
  if (!r.success) throw new UsageError('--user must be agent or root');
  return r.data;
}

export const cp: Command = {
  usage: 'cp SRC DST   (one of them MACHINE:/path) [--user agent|root] [--max-mib N]',
  summary: 'copy a file into or out of a machine',
  options: { user: { type: 'string' }, 'max-mib': { type: 'string' } },
  positionals: ['SRC', 'DST'],
  async run({ values, positionals }, ctx) {
    const [src, dst] = [positionals[0]!, positionals[1]!];
    const from = parseRemote(src);
    const to = parseRemote(dst);
    if (!!from === !!to) throw new UsageError('exactly one of SRC and DST must be MACHINE:/path', cp.usage);
    const user = userOpt(values.user);
    const cx = ctx.client();
    if (from) {
      const maxMib = int(values['max-mib'], 'max-mib', 1, 1024 * 1024);
      const m = await machineArg(cx, from.machine);
      let local = dst;
      if (fs.existsSync(local) && fs.statSync(local).isDirectory()) local = path.join(local, path.posix.basename(from.path));
      const bar = progressBar(ctx.err, path.posix.basename(from.path));
      try {
        const bytes = await m.readFile(from.path, { user, maxBytes: maxMib === undefined ? undefined : maxMib * 1024 * 1024, onProgress: bar.update });
        fs.writeFileSync(local, bytes);
      } finally {
        bar.done();
      }
      return;
    }
    const remote = to!;
    const m = await machineArg(cx, remote.machine);
    const bytes = fs.readFileSync(src);
    const target = remote.path.endsWith('/') ? remote.path + path.basename(src) : remote.path;
    const bar = progressBar(ctx.err, path.basename(src));
    try {
      await m.uploadFile(target, bytes, { user, onProgress: bar.update });
    } finally {
      bar.done();
    }
  },
};

const FORMATS = { '.png': 'png', '.jpg': 'jpeg', '.jpeg': 'jpeg', '.webp': 'webp' } as const;

export const screenshot: Command = {
  usage: 'screenshot MACHINE -o FILE.png|.jpg|.webp   (or > file when stdout is not a terminal)',
  summary: 'save a screenshot of the desktop',
  options: { output: { type: 'string', short: 'o' } },
  positionals: ['MACHINE'],
  async run({ values, positionals }, ctx) {
    const out = str(values.output);
    if (!out && ctx.stdout.isTTY) throw new UsageError('give -o FILE (or redirect stdout)', screenshot.usage);
    const ext = out ? path.extname(out).toLowerCase() : '.png';
    const format = ext in FORMATS ? FORMATS[ext as keyof typeof FORMATS] : undefined;
    if (!format) throw new UsageError('the output file must end in .png, .jpg, .jpeg or .webp', screenshot.usage);
    const m = await machineArg(ctx.client(), positionals[0]!);
    const img = await m.screenshot({ format });
    if (out) fs.writeFileSync(out, img);
    else ctx.out.write(img);
  },
};
