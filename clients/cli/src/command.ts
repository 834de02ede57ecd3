/** The shape of one CLI command and the context every command runs in. */
import type { ParseArgsConfig } from 'node:util';
import { Computer, ComputerError, type MachineHandle } from '../../sdk/src/index.js';
import { resolveConfig } from './config.js';
import { UsageError, type Io } from './output.js';

export type Values = Record<string, string | boolean | undefined>;

export interface Args {
  values: Values;
  positionals: string[];
  /** Everything after `--` (exec, shell). */
  rest: string[];
}

export interface Ctx extends Io {
  env: NodeJS.ProcessEnv;
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  /** The client from the environment or the stored login; a UsageError when there is neither. */
  client(): Computer;
}

export interface Command {
  /** e.g. `machines stop MACHINE` */
  usage: string;
  summary: string;
  options?: NonNullable<ParseArgsConfig['options']>;
  /** Exactly these positionals (names for the usage line); `min` when some are optional. */
  positionals: string[];
  minPositionals?: number;
  run(a: Args, ctx: Ctx): Promise<number | void>;
}

export const JSON_FLAG = { json: { type: 'boolean' } } as const;

export function makeClient(env: NodeJS.ProcessEnv): Computer {
  const cfg = resolveConfig(env);
  if (!cfg) throw new UsageError('not logged in: run `computer login` or set COMPUTER_API_KEY');
  return new Computer({ apiKey: cfg.api_key, baseUrl: cfg.base_url });
}

export function str(v: string | boolean | undefined): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

export function int(v: string | boolean | undefined, name: string, min: number, max: number): number | undefined {
  if (typeof v !== 'string') return undefined;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) throw new UsageError(`--${name} must be an integer from ${min} to ${max}`);
  return Number(v);
}

/** Every page of a cursor-paged listing. */
export async function allPages<T>(page: (cursor: string | undefined) => Promise<{ data: T[]; next_cursor: string | null }>): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | undefined;
  do {
    const p = await page(cursor);
    out.push(...p.data);
    cursor = p.next_cursor ?? undefined;
  } while (cursor);
  return out;
}

/**
 * MACHINE is an id (`mch_…`) or a machine name; a name is looked up in the organization's list and must
 * match exactly one machine.
 */
export async function machineArg(cx: Computer, ref: string): Promise<MachineHandle> {
  if (ref.startsWith('mch_')) return cx.machine(ref);
  const all = await allPages((cursor) => cx.listMachines({ limit: 200, cursor }));
  const hits = all.filter((m) => m.name === ref);
  if (hits.length === 1) return cx.machine(hits[0]!.id);
  const message = hits.length === 0 ? `No machine is named ${ref}.` : `${hits.length} machines are named ${ref}; use an id.`;
  throw new ComputerError(hits.length === 0 ? 404 : 409, { code: hits.length === 0 ? 'not_found' : 'conflict', message, request_id: '', details: [], quota: null });
}
