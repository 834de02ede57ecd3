/**
 * HTTP/2 sessions to guest agents, one per machine, over the substrate's channel. A session that dies
 * (agent restart, machine stop) is dropped and the next request dials again. Every request has a
 * deadline, so a dead or wedged machine yields 503 `compute_unavailable` instead of a hang.
 */
import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import { AGENT_ROUTES, AGENT_SESSION_MEMORY_MB } from '../../../shared/agent-protocol.js';
import { AppError } from '../../../shared/errors.js';
import { ERRORS } from '../errors.js';

export interface AgentRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Agent path plus query string, e.g. `/files?path=%2Ftmp`. */
  path: string;
  /** Raw JSON text to send. */
  body?: string;
  requestId?: string;
  /** Overrides the pool's default deadline (e.g. an exec with a long timeout_ms). */
  timeoutMs?: number;
}

export interface AgentResponse {
  status: number;
  contentType: string | null;
  body: Buffer;
}

export interface AgentPoolOptions {
  openChannel: (machineId: string) => Promise<Duplex>;
  /** Proof for a fresh agent process's enrollment: a one-time secret, or null (Substrate.issueEnrollment). */
  issueEnrollment: (machineId: string) => Promise<string | null>;
  /** Deadline for dialing and for the HTTP/2 settings exchange. */
  connectTimeoutMs?: number;
  /** Default deadline for a whole request. */
  requestTimeoutMs?: number;
  /** Refuse agent answers bigger than this (screenshots and 4 MB file ranges fit). */
  maxResponseBytes?: number;
  /** While a request is pending the session is pinged every second; an unanswered ping fails it after this. */
  pingTimeoutMs?: number;
}

/** Per session, while requests are pending on it: the health ping. */
interface Health {
  users: number;
  inFlight: boolean;
  lastAck: number;
  timer: NodeJS.Timeout | null;
  /** A ping went unanswered: the session was destroyed and its requests fail as "not responding". */
  wedged: boolean;
}

interface Entry {
  session: Promise<http2.ClientHttp2Session>;
  /** Once dialed. */
  live?: http2.ClientHttp2Session;
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
/**
 * A live agent answers an HTTP/2 PING from its event loop within milliseconds, even in the middle of a long
 * exec; one that does not within this is stopped (SIGSTOP) or wedged, and waiting for the request's own
 * deadline (30 s, or an exec's timeout) would only make every caller wait for nothing.
 */
export const DEFAULT_PING_TIMEOUT_MS = 3_000;
const PING_INTERVAL_MS = 1_000;
const NOT_RESPONDING = 'The machine agent is not responding.';
/**
 * The largest answer buffered from an agent (the bytes come from the guest, so they are bounded here,
 * not trusted): a 4 MiB file range as base64, 2 × 1 MiB of exec output JSON-escaped, or a screenshot of
 * the largest display all fit well below it.
 */
export const DEFAULT_MAX_RESPONSE = 64 * 1024 * 1024;
const MAX_AGENT_HEADER_BYTES = 64 * 1024;
/**
 * The receive window each stream on a machine's session starts with (SETTINGS_INITIAL_WINDOW_SIZE; HTTP/2
 * has no per-stream setting, so it is the session's). It is what an agent may send on a stream nobody reads:
 * a preview download whose client stopped reading holds this much of the control plane's memory, no more
 * (it was 8 MiB: 300 stalled downloads took 1.4 GiB). Over a local socket a larger window is not faster
 * (100 MB in 256 KiB windows moved as fast as in 8 MiB ones here); the connection window stays large.
 */
export const AGENT_STREAM_WINDOW_BYTES = 256 * 1024;

function unavailable(message: string, cause?: unknown): AppError {
  return ERRORS.agentUnreachable(message, cause);
}

function withDeadline<T>(p: Promise<T>, ms: number, onTimeout: () => void, message: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      onTimeout();
      reject(unavailable(message));
    }, ms);
    timer.unref?.();
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

const DEADLINE_MESSAGE = 'The machine agent did not answer in time.';
/** Why an agent request got no answer: its deadline passed, or the agent could not be reached / the connection failed. */
export type AgentCallFailure = 'timeout' | 'unavailable';

export class AgentPool {
  private readonly entries = new Map<string, Entry>();
  private readonly connectTimeoutMs: number;
  private readonly requestTimeoutMs: number;
  private readonly maxResponseBytes: number;
  private readonly pingTimeoutMs: number;
  private readonly health = new WeakMap<http2.ClientHttp2Session, Health>();
  private closed = false;
  private readonly failureListeners = new Set<(reason: AgentCallFailure) => void>();

  constructor(private readonly opts: AgentPoolOptions) {
    this.connectTimeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.maxResponseBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE;
    this.pingTimeoutMs = opts.pingTimeoutMs ?? DEFAULT_PING_TIMEOUT_MS;
  }

  /**
   * Health pings while a request is pending on `session`: one at once (unless one was answered within the last
   * second), then one a second. A ping unanswered for pingTimeoutMs destroys the session, which fails its
   * pending requests with "not responding" and makes the next request dial again. Returns the release.
   */
  private heartbeat(machineId: string, session: http2.ClientHttp2Session): () => void {
    let h = this.health.get(session);
    if (!h) {
      h = { users: 0, inFlight: false, lastAck: 0, timer: null, wedged: false };
      this.health.set(session, h);
    }
    const health = h;
    health.users++;
    const beat = () => {
      if (health.inFlight || session.closed || session.destroyed || Date.now() - health.lastAck < PING_INTERVAL_MS) return;
      health.inFlight = true;
      const deadline = setTimeout(() => {
        health.wedged = true;
        if (this.entries.get(machineId)?.live === session) this.entries.delete(machineId);
        session.destroy();
      }, this.pingTimeoutMs);
      deadline.unref?.();
      try {
        session.ping((err) => {
          clearTimeout(deadline);
          health.inFlight = false;
          if (!err) health.lastAck = Date.now();
        });
      } catch {
        clearTimeout(deadline);
        health.inFlight = false;
      }
    };
    beat();
    if (!health.timer) {
      health.timer = setInterval(beat, PING_INTERVAL_MS);
      health.timer.unref?.();
    }
    return () => {
      if (--health.users === 0 && health.timer) {
        clearInterval(health.timer);
        health.timer = null;
      }
    };
  }

  private wedged(session: http2.ClientHttp2Session): boolean {
    return this.health.get(session)?.wedged ?? false;
  }

  /** Number of machines with a live or dialing session (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  private dial(machineId: string, key: string): Promise<http2.ClientHttp2Session> {
    let session: http2.ClientHttp2Session | null = null;
    let channel: Duplex | null = null;
    const drop = () => {
      if (this.entries.get(machineId) === entry) this.entries.delete(machineId);
    };
    const connecting = (async () => {
      try {
        channel = await this.opts.openChannel(machineId);
      } catch (e) {
        throw unavailable('The machine is not reachable.', e);
      }
      const ch = channel;
      // Streams get a small window (what a stalled reader may cost), the connection a large one.
      const s = http2.connect('http://agent', {
        createConnection: () => ch as never,
        // The agent is untrusted: it may not push streams at us, and its header blocks are bounded.
        settings: { initialWindowSize: AGENT_STREAM_WINDOW_BYTES, enablePush: false, maxHeaderListSize: MAX_AGENT_HEADER_BYTES },
        // Queued request bodies count against it: one maximal file write must not exceed it.
        maxSessionMemory: AGENT_SESSION_MEMORY_MB,
      });
      s.once('connect', () => s.setLocalWindowSize(32 * 1024 * 1024));
      session = s;
      s.on('error', () => {});
      s.on('close', drop);
      s.on('goaway', drop);
      // The peer's SETTINGS frame is the first proof that an agent (not just a socket) is there.
      await new Promise<void>((resolve, reject) => {
        s.once('remoteSettings', () => resolve());
        s.once('close', () => reject(unavailable('The machine agent closed the connection.')));
      });
      // Under the health ping like any request: an agent stopped right after its handshake fails fast.
      const release = this.heartbeat(machineId, s);
      try {
        await this.enroll(s, machineId, key);
      } catch (e) {
        throw this.wedged(s) ? unavailable(NOT_RESPONDING, e) : e;
      } finally {
        release();
      }
      return s;
    })();
    const guarded = withDeadline(connecting, this.connectTimeoutMs, () => {
      drop();
      (session as http2.ClientHttp2Session | null)?.destroy();
      (channel as Duplex | null)?.destroy();
    }, 'The machine agent did not answer in time.');
    const entry: Entry = { session: guarded };
    guarded.then((s) => (entry.live = s), () => drop());
    this.entries.set(machineId, entry);
    return guarded;
  }

  /**
   * Every new connection first makes sure the agent process behind it holds `key` (agent/src/enrollment.ts):
   * one round trip confirms it where it does (a reconnect, a restarted control plane); a fresh agent process
   * (the machine booted, or its init restarted the agent) gets it with the substrate's one-time proof.
   */
  private async enroll(s: http2.ClientHttp2Session, machineId: string, key: string): Promise<void> {
    if ((await enrollRequest(s, key, key)) === 204) return;
    let proof: string | null;
    try {
      proof = await this.opts.issueEnrollment(machineId);
    } catch (e) {
      throw unavailable('The machine agent could not be enrolled.', e);
    }
    if ((await enrollRequest(s, proof, key)) !== 204) throw unavailable('The machine agent refused its enrollment.');
  }

  /**
   * The machine's one HTTP/2 session (dialed and enrolled with `key` if needed). The gateway borrows it for
   * long-lived streams: a VM's virtio-serial chardev accepts a single host connection, so everything must share it.
   */
  session(machineId: string, key: string): Promise<http2.ClientHttp2Session> {
    return this.sessionFor(machineId, key);
  }

  private async sessionFor(machineId: string, key: string): Promise<http2.ClientHttp2Session> {
    if (this.closed) throw unavailable('The control plane is shutting down.');
    const e = this.entries.get(machineId);
    if (e) {
      const s = await e.session;
      if (!s.closed && !s.destroyed) return s;
      if (this.entries.get(machineId) === e) this.entries.delete(machineId);
    }
    return this.dial(machineId, key);
  }

  /**
   * One request to the machine's agent with its bearer `token`. Resolves with whatever the agent
   * answered (error envelopes included); rejects with 503 `compute_unavailable` when the agent cannot
   * be reached or does not answer before the deadline.
   */
  async request(machineId: string, token: string, req: AgentRequest): Promise<AgentResponse> {
    try {
      return await this.requestOnce(machineId, token, req);
    } catch (e) {
      const reason: AgentCallFailure = (e as Error)?.message === DEADLINE_MESSAGE ? 'timeout' : 'unavailable';
      for (const l of this.failureListeners) l(reason);
      throw e;
    }
  }

  /** Told of every request that did not get an answer (operator metrics). */
  onCallFailure(l: (reason: AgentCallFailure) => void): void {
    this.failureListeners.add(l);
  }

  private async requestOnce(machineId: string, token: string, req: AgentRequest): Promise<AgentResponse> {
    const timeoutMs = req.timeoutMs ?? this.requestTimeoutMs;
    const session = await this.sessionFor(machineId, token);
    const release = this.heartbeat(machineId, session);
    let stream: http2.ClientHttp2Stream | null = null;
    const run = new Promise<AgentResponse>((resolve, reject) => {
      const headers: http2.OutgoingHttpHeaders = { ':method': req.method, ':path': req.path, authorization: `Bearer ${token}` };
      if (req.requestId) headers['x-request-id'] = req.requestId;
      if (req.body !== undefined) headers['content-type'] = 'application/json';
      try {
        stream = session.request(headers, { endStream: req.body === undefined });
      } catch (e) {
        this.drop(machineId);
        reject(unavailable('The machine agent connection failed.', e));
        return;
      }
      const s = stream;
      let status = 0;
      let contentType: string | null = null;
      const chunks: Buffer[] = [];
      let size = 0;
      s.on('response', (h) => {
        status = Number(h[':status']);
        const ct = h['content-type'];
        contentType = typeof ct === 'string' ? ct : null;
      });
      s.on('data', (c: Buffer) => {
        size += c.length;
        if (size > this.maxResponseBytes) {
          s.close(http2.constants.NGHTTP2_CANCEL);
          reject(unavailable('The machine agent answered with more data than any answer may hold.'));
          return;
        }
        chunks.push(c);
      });
      const unanswered = () => unavailable(this.wedged(session) ? NOT_RESPONDING : 'The machine agent closed the request without answering.');
      s.on('end', () => {
        if (status === 0) reject(unanswered());
        else resolve({ status, contentType, body: Buffer.concat(chunks) });
      });
      s.on('error', (e) => reject(unavailable(this.wedged(session) ? NOT_RESPONDING : 'The machine agent connection failed.', e)));
      s.on('close', () => {
        if (status === 0 || this.wedged(session)) reject(unanswered());
      });
      if (req.body !== undefined) s.end(req.body);
    });
    return withDeadline(run, timeoutMs, () => {
      (stream as http2.ClientHttp2Stream | null)?.close(http2.constants.NGHTTP2_CANCEL);
      // A deadline miss may mean the whole connection is wedged: check it, and drop it if it is.
      this.probe(machineId, session);
    }, DEADLINE_MESSAGE).finally(release);
  }

  private probe(machineId: string, session: http2.ClientHttp2Session): void {
    if (session.closed || session.destroyed) return;
    const timer = setTimeout(() => {
      this.drop(machineId);
      session.destroy();
    }, Math.min(this.connectTimeoutMs, 2_000));
    timer.unref?.();
    try {
      session.ping((err) => {
        clearTimeout(timer);
        if (err) {
          this.drop(machineId);
          session.destroy();
        }
      });
    } catch {
      clearTimeout(timer);
      this.drop(machineId);
      session.destroy();
    }
  }

  /** Forget (and close) the machine's session: after stop, delete, or an agent restart. */
  drop(machineId: string): void {
    const e = this.entries.get(machineId);
    if (!e) return;
    this.entries.delete(machineId);
    e.session.then((s) => s.destroy(), () => {});
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const id of [...this.entries.keys()]) this.drop(id);
  }
}

/** One `POST /auth/enroll` on a fresh session; resolves with the status (the answer's body is not read). */
function enrollRequest(s: http2.ClientHttp2Session, bearer: string | null, key: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const headers: http2.OutgoingHttpHeaders = { ':method': 'POST', ':path': AGENT_ROUTES['auth.enroll'].path, 'content-type': 'application/json' };
    if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
    let stream: http2.ClientHttp2Stream;
    try {
      stream = s.request(headers);
    } catch (e) {
      reject(unavailable('The machine agent connection failed.', e));
      return;
    }
    stream.on('error', (e) => reject(unavailable('The machine agent connection failed.', e)));
    stream.once('response', (h) => {
      resolve(Number(h[':status']));
      stream.close(http2.constants.NGHTTP2_NO_ERROR);
    });
    stream.once('close', () => reject(unavailable('The machine agent closed the request without answering.')));
    stream.end(JSON.stringify({ key }));
  });
}
