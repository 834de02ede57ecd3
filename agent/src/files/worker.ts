/**
 * The files worker: the files API for the `agent` user, in a process that runs as that user, so the
 * kernel decides what may be read, listed and written (no permission emulation). The agent starts it
 * through computer-spawn with the user's uid/gid and no supplementary groups, and talks to it over
 * stdin/stdout (worker-protocol.ts). The same FileService runs here as in the agent, with the same
 * denylist walk; the denied identities the agent captured as root are handed over (this process
 * cannot stat what it cannot reach, but must still refuse hard links to it).
 *
 *   node worker.js '<WorkerConfig JSON>'
 */
import { isAppError } from '../../../shared/errors.js';
import type { DenySpec } from '../denylist/index.js';
import type { UserInfo } from '../users.js';
import { createFileService } from './service.js';
import { encodeFrame, FrameDecoder, WorkerRequest, type Frame, type WorkerAnswer } from './worker-protocol.js';

export interface WorkerConfig {
  deny: DenySpec;
  agentPid: number;
  identities: { inodes: string[]; rdevs: number[] };
  user: UserInfo;
}

const cfg = JSON.parse(process.argv[2] ?? '{}') as WorkerConfig;
const svc = createFileService({ deny: cfg.deny, agentPid: cfg.agentPid, deniedIdentities: cfg.identities, resolveUser: () => cfg.user });

function answer(a: WorkerAnswer, payload?: Buffer): void {
  for (const part of encodeFrame(a, payload)) process.stdout.write(part);
}

async function handle(frame: Frame): Promise<void> {
  const parsed = WorkerRequest.safeParse(frame.header);
  if (!parsed.success) {
    // Never leave the agent waiting: answer what can be answered.
    const id = (frame.header as { id?: unknown } | null)?.id;
    if (typeof id === 'number' && Number.isInteger(id)) answer({ id, ok: false, internal: 'EPROTO' });
    return;
  }
  const req = parsed.data;
  try {
    if (req.op === 'range') {
      const r = await svc.readRange(req);
      answer({ id: req.id, ok: true, value: { size: r.size, eof: r.eof } }, r.data);
    } else if (req.op === 'list') {
      answer({ id: req.id, ok: true, value: await svc.list(req.path) });
    } else {
      answer({ id: req.id, ok: true, value: await svc.writeBytes(req.path, frame.payload, req.opts) });
    }
  } catch (e) {
    if (isAppError(e)) answer({ id: req.id, ok: false, error: { code: e.code, message: e.message, details: e.details } });
    else answer({ id: req.id, ok: false, internal: String((e as { code?: unknown })?.code ?? (e as Error)?.name ?? 'unknown').slice(0, 64) });
  }
}

const decoder = new FrameDecoder();
process.stdin.on('data', (chunk: Buffer) => {
  let frames: Frame[];
  try {
    frames = decoder.push(chunk);
  } catch {
    process.exit(2);
  }
  for (const f of frames) void handle(f);
});
// The agent went away (or closed our stdin to stop us).
process.stdin.on('end', () => process.exit(0));
