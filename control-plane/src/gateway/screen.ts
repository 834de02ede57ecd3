/**
 * Screen channel: one agent screen stream per (machine, format, quality, fps, encoding), shared by every
 * viewer asking for those parameters. Status changes go to viewers as JSON; pictures as binary messages:
 * encoding `frames`, bare images; encoding `tiles`, the agent's `frame` (key) and `tiles` (delta)
 * messages re-framed from their parsed headers (docs/gateway.md "Screen encodings").
 *
 * The current picture is kept as the messages that make it: `frames`, the newest image; `tiles`, the last
 * key frame and the deltas since (the agent sends a key frame again once deltas outweigh it 3x; the gateway
 * also drops a history above `maxReplay` and waits for the next key frame, so a hostile agent cannot make
 * it grow). A viewer that joins, or that fell behind, is sent the whole current picture; deltas only reach
 * a viewer that has every message before them.
 *
 * Invariant (backpressure): a viewer whose socket holds more than `maxBuffered` unsent bytes gets
 * nothing new; when it has drained it gets the current picture (never a queue of old ones). So a stalled
 * viewer costs at most maxBuffered + one picture of memory and never delays anyone else.
 */
import http2 from 'node:http2';
import { WebSocket } from 'ws';
import { AppError } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';
import { encodeScreenMessage, ScreenStreamDecoder, ScreenStreamError } from '../../../shared/agent-protocol.js';
import { CLOSE_CODES, type ScreenChannelQuery, type ScreenStatusMessage } from '../../../shared/schemas/gateway.js';
import { readAgentError, streamRequest } from '../services/machine-agent/index.js';
import type { GatewayDeps, OpenedStream } from './deps.js';
import { sendBinary, sendJson } from './send.js';

export interface ScreenLimits {
  /** Unsent bytes above which a viewer's frames are dropped. */
  maxBuffered: number;
  /** Wait before reopening the agent stream after it failed or ended. */
  retryMs: number;
  /** How often a viewer that missed frames is checked for having drained. */
  catchUpMs: number;
  /**
   * An agent stream that delivers no whole message for this long is dropped and reopened (the agent
   * sends a keepalive every 5 s; a replaced one may trickle a frame forever).
   */
  idleMs: number;
  /** Encoding `tiles`: the most bytes of key frame + deltas kept to bring a viewer up to date. */
  maxReplay: number;
}

export const DEFAULT_SCREEN_LIMITS: ScreenLimits = { maxBuffered: 1024 * 1024, retryMs: 1000, catchUpMs: 100, idleMs: 20_000, maxReplay: 8 * 1024 * 1024 };

interface Viewer {
  ws: WebSocket;
  /** Missed a message because its socket was full: gets the whole current picture next. */
  behind: boolean;
}

class SharedScreen {
  readonly viewers = new Set<Viewer>();
  private status: ScreenStatusMessage;
  /** Whether `status` reflects the agent yet (viewers are told nothing before that). */
  private known = false;
  /** The messages that make the current picture (see the file comment); empty while there is none. */
  private picture: Buffer[] = [];
  private pictureBytes = 0;
  private agent: OpenedStream | null = null;
  private retry: NodeJS.Timeout | null = null;
  private catchUp: NodeJS.Timeout | null = null;
  private stopped = false;
  /** Frames dropped for slow viewers (tests, metrics). */
  dropped = 0;

  constructor(
    private readonly deps: GatewayDeps,
    private readonly limits: ScreenLimits,
    private readonly orgId: string,
    private readonly machineId: string,
    private readonly q: ScreenChannelQuery,
    private readonly onEmpty: () => void,
  ) {
    this.status = { type: 'status', up: false, width: 0, height: 0, format: q.format, encoding: q.encoding, code: 'compute_unavailable', message: 'Connecting to the machine.' };
    void this.open();
  }

  add(ws: WebSocket): void {
    const v: Viewer = { ws, behind: false };
    this.viewers.add(v);
    if (this.known) sendJson(ws, this.deps.egress, this.machineId, this.status);
    // The agent only sends frames on change: a new viewer gets the current picture at once.
    this.sendPicture(v);
    ws.once('close', () => {
      this.viewers.delete(v);
      if (this.viewers.size === 0) this.stop();
    });
  }

  private setStatus(next: Omit<ScreenStatusMessage, 'type' | 'format' | 'encoding'>): void {
    const s = this.status;
    if (this.known && s.up === next.up && s.width === next.width && s.height === next.height && s.code === next.code) return;
    this.known = true;
    if (!next.up || next.width !== s.width || next.height !== s.height) this.setPicture([]);
    this.status = { type: 'status', format: this.q.format, encoding: this.q.encoding, ...next };
    for (const v of this.viewers) sendJson(v.ws, this.deps.egress, this.machineId, this.status);
  }

  private down(message: string): void {
    this.setStatus({ up: false, width: this.status.width, height: this.status.height, code: 'compute_unavailable', message });
  }

  private async open(): Promise<void> {
    if (this.stopped) return;
    // `encoding` only when it is not the default, so agents that predate it still serve `frames`.
    const query = `format=${this.q.format}&quality=${this.q.quality}&fps=${this.q.fps}${this.q.encoding === 'tiles' ? '&encoding=tiles' : ''}`;
    let o: OpenedStream;
    try {
      o = await this.deps.openAgentStream(this.orgId, this.machineId, streamRequest('screen.stream', {}, query));
    } catch (e) {
      return this.failed(e);
    }
    if (this.stopped) {
      o.stream.close(http2.constants.NGHTTP2_CANCEL);
      return;
    }
    if (o.status !== 200) {
      const err = await readAgentError(o, 'screen.stream');
      return this.failed(ERRORS.screenStreamRefused(err.message));
    }
    this.agent = o;
    const decoder = new ScreenStreamDecoder();
    let idle: NodeJS.Timeout | null = null;
    const armIdle = () => {
      if (idle) clearTimeout(idle);
      idle = setTimeout(() => o.stream.close(http2.constants.NGHTTP2_CANCEL), this.limits.idleMs);
      idle.unref();
    };
    armIdle();
    o.stream.on('data', (chunk: Buffer) => {
      let msgs;
      try {
        msgs = decoder.push(chunk);
      } catch (e) {
        // Security gate: the framing comes from the guest. A violation ends this stream (and only this
        // machine's); the agent is dialed again after retryMs like after any failure.
        this.deps.log?.({ event: 'agent_protocol_violation', machine_id: this.machineId, channel: 'screen', reason: e instanceof ScreenStreamError ? e.message : 'malformed' });
        o.stream.close(http2.constants.NGHTTP2_PROTOCOL_ERROR);
        return;
      }
      if (msgs.length) armIdle();
      for (const { header, payload } of msgs) {
        if (header.type === 'status') {
          this.setStatus(
            header.up
              ? { up: true, width: header.width, height: header.height, code: null, message: null }
              : { up: false, width: header.width, height: header.height, code: 'compute_unavailable', message: 'The desktop is not up.' },
          );
        } else if (header.type === 'frame') {
          if (header.width !== this.status.width || header.height !== this.status.height) {
            this.setStatus({ up: true, width: header.width, height: header.height, code: null, message: null });
          }
          this.broadcast(this.q.encoding === 'tiles' ? encodeScreenMessage(header, payload) : payload, true);
        } else if (header.type === 'tiles') {
          // A delta applies to the picture of the announced size only; one for another size is a lie.
          if (this.q.encoding !== 'tiles' || header.width !== this.status.width || header.height !== this.status.height) {
            this.deps.log?.({ event: 'agent_protocol_violation', machine_id: this.machineId, channel: 'screen', reason: 'tiles that do not fit the picture' });
            o.stream.close(http2.constants.NGHTTP2_PROTOCOL_ERROR);
            return;
          }
          // Without its key frame (dropped history) a delta means nothing: wait for the next key frame.
          this.broadcast(encodeScreenMessage(header, payload), false);
        }
      }
    });
    o.stream.once('close', () => {
      if (idle) clearTimeout(idle);
      if (this.agent === o) this.agent = null;
      this.failed(ERRORS.screenStreamEnded());
    });
  }

  private failed(e: unknown): void {
    if (this.stopped) return;
    if (e instanceof AppError && e.code === 'not_found') {
      for (const v of this.viewers) v.ws.close(CLOSE_CODES.not_found, 'machine not found');
      return;
    }
    // A stopped machine and a desktop that is not up look the same to a viewer: no frames for now.
    this.down(e instanceof AppError ? e.message : 'The machine is not reachable.');
    if (this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      void this.open();
    }, this.limits.retryMs);
  }

  private setPicture(msgs: Buffer[]): void {
    this.picture = msgs;
    this.pictureBytes = msgs.reduce((n, m) => n + m.length, 0);
  }

  /** Whether `v` can take more now; if not it is marked behind and will get the whole picture later. */
  private hasRoom(v: Viewer): boolean {
    if (v.ws.readyState !== WebSocket.OPEN) return false;
    if (v.ws.bufferedAmount <= this.limits.maxBuffered) return true;
    this.dropped++;
    v.behind = true;
    this.scheduleCatchUp();
    return false;
  }

  /** The whole current picture (a joining viewer, a viewer that fell behind). */
  private sendPicture(v: Viewer): void {
    if (!this.status.up || !this.picture.length || !this.hasRoom(v)) return;
    v.behind = false;
    for (const m of this.picture) sendBinary(v.ws, this.deps.egress, this.machineId, m);
  }

  /** A whole picture (`key`: an image, a key frame) replaces the current one; a delta extends it. */
  private broadcast(msg: Buffer, key: boolean): void {
    if (key || this.pictureBytes + msg.length > this.limits.maxReplay) this.setPicture([]);
    if (!key && !this.picture.length) {
      // No key frame to apply it to (the history outgrew maxReplay, or none came yet): nobody can be
      // brought up to date until the next key frame.
      for (const v of this.viewers) v.behind = true;
      return;
    }
    this.setPicture([...this.picture, msg]);
    for (const v of this.viewers) {
      if (v.behind) this.sendPicture(v);
      else if (this.hasRoom(v)) sendBinary(v.ws, this.deps.egress, this.machineId, msg);
    }
  }

  /** Viewers that missed frames get the newest one once their socket has room again. */
  private scheduleCatchUp(): void {
    if (this.catchUp) return;
    this.catchUp = setInterval(() => {
      let anyBehind = false;
      for (const v of this.viewers) {
        if (!v.behind) continue;
        if (v.ws.bufferedAmount <= this.limits.maxBuffered) this.sendPicture(v);
        anyBehind ||= v.behind;
      }
      if (!anyBehind && this.catchUp) {
        clearInterval(this.catchUp);
        this.catchUp = null;
      }
    }, this.limits.catchUpMs);
    this.catchUp.unref();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    if (this.catchUp) clearInterval(this.catchUp);
    this.agent?.stream.close(http2.constants.NGHTTP2_CANCEL);
    this.agent = null;
    this.setPicture([]);
    this.onEmpty();
  }
}

export interface ScreenStreamInfo {
  key: string;
  viewers: number;
  /** Frames not sent to a viewer because its socket was full. */
  dropped: number;
  /** Each viewer's unsent bytes right now. */
  buffered: number[];
}

export class ScreenHub {
  private readonly shared = new Map<string, SharedScreen>();
  private readonly limits: ScreenLimits;

  constructor(private readonly deps: GatewayDeps, limits: Partial<ScreenLimits> = {}) {
    this.limits = { ...DEFAULT_SCREEN_LIMITS, ...limits };
  }

  join(ws: WebSocket, orgId: string, machineId: string, q: ScreenChannelQuery): void {
    const key = `${machineId}|${q.format}|${q.quality}|${q.fps}|${q.encoding}`;
    let s = this.shared.get(key);
    if (!s) {
      const created: SharedScreen = new SharedScreen(this.deps, this.limits, orgId, machineId, q, () => {
        if (this.shared.get(key) === created) this.shared.delete(key);
      });
      s = created;
      this.shared.set(key, s);
    }
    s.add(ws);
  }

  /** Agent streams currently open or opening (tests: viewers share one). */
  streams(): ScreenStreamInfo[] {
    return [...this.shared.entries()].map(([key, s]) => ({
      key, viewers: s.viewers.size, dropped: s.dropped, buffered: [...s.viewers].map((v) => v.ws.bufferedAmount),
    }));
  }

  close(): void {
    for (const s of [...this.shared.values()]) s.stop();
    this.shared.clear();
  }
}
