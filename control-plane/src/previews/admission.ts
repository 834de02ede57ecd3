/**
 * How many preview connections (requests and WebSockets, one agent stream each) may be open, per machine
 * and in all (pure bookkeeping). Each open connection can hold at most its stream's receive window of guest
 * bytes that its client has not read, plus a few buffers of Node's on either side (`perConnectionBytes`);
 * it reserves that much of a global byte budget when it opens, so however many clients stop reading, the
 * control plane holds at most `budgetBytes` for previews, and one machine at most `perMachine` of them.
 * A connection beyond either bound is refused with the preview host's 503 page before a stream opens.
 */
import { AGENT_STREAM_WINDOW_BYTES } from '../services/machine-agent/index.js';

export interface PreviewAdmissionLimits {
  /** Open preview connections per machine. */
  perMachine: number;
  /** What all open preview connections may hold in the control plane, reserved per connection. */
  budgetBytes: number;
}

/**
 * Node's buffers around one stream beyond its window: the client socket's and the response's
 * high-water marks with one frame or read past them, the request body's likewise, a partial answer head.
 */
export const PREVIEW_SLACK_BYTES = 128 * 1024;
/** The worst case one open preview connection holds. */
export const PREVIEW_CONNECTION_BYTES = AGENT_STREAM_WINDOW_BYTES + PREVIEW_SLACK_BYTES;

/** 128 per machine (the agent holds 512 streams), 256 MiB in all (~680 connections). */
export const DEFAULT_PREVIEW_LIMITS: PreviewAdmissionLimits = { perMachine: 128, budgetBytes: 256 * 1024 * 1024 };

export type AdmissionRefusal = 'machine' | 'budget';

export class PreviewAdmission {
  private readonly open = new Map<string, number>();
  private total = 0;

  constructor(private readonly limits: PreviewAdmissionLimits = DEFAULT_PREVIEW_LIMITS) {}

  /** A slot for one connection to `machineId` (call the returned release once, when it closes), or why not. */
  acquire(machineId: string): { release: () => void } | { refused: AdmissionRefusal } {
    const mine = this.open.get(machineId) ?? 0;
    if (mine >= this.limits.perMachine) return { refused: 'machine' };
    if ((this.total + 1) * PREVIEW_CONNECTION_BYTES > this.limits.budgetBytes) return { refused: 'budget' };
    this.open.set(machineId, mine + 1);
    this.total++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        const left = (this.open.get(machineId) ?? 1) - 1;
        if (left > 0) this.open.set(machineId, left);
        else this.open.delete(machineId);
      },
    };
  }

  /** Bytes reserved by open connections (never above the budget). */
  reservedBytes(): number {
    return this.total * PREVIEW_CONNECTION_BYTES;
  }
}
