/**
 * TypeScript SDK for the computer API: a typed fetch wrapper over the shared zod schemas (the same
 * ones the OpenAPI document is generated from), with what the spec puts on SDKs: retries of
 * `compute_unavailable` honoring Retry-After, quota errors as data, downloads looped to `eof` under a
 * cap, snapshot creation that waits, and input-lease auto-renewal at half the ttl.
 */
import type { z } from 'zod';
import type { ScreenshotResult } from '../../../shared/schemas/display.js';
import type { ExecRequest, ExecResult } from '../../../shared/schemas/exec.js';
import type { ReadResult, WriteResult } from '../../../shared/schemas/files.js';
import type { CreateMachineRequest, Machine } from '../../../shared/schemas/machine.js';
import type { PublishPortRequest } from '../../../shared/schemas/ports.js';
import type { PtyOpen, Terminal } from '../../../shared/schemas/pty.js';
import type { LeaseGrant, MachinePage, Preview, PreviewPage, Session, SnapshotPage } from '../../../shared/schemas/responses.js';
import type { MachineSecretList, Secret } from '../../../shared/schemas/secrets.js';
import type { ForkMachineRequest, Snapshot, SnapshotListQuery } from '../../../shared/schemas/snapshot.js';
import { ComputerError, errorFromBody, type ErrorBody } from './errors.js';
import { EventStream, openChannel, ScreenStream } from './channels.js';
import { attachTerminal, type TerminalStream } from './terminal.js';

export { ComputerError, type ErrorBody, type Quota } from './errors.js';

export const DEFAULT_DOWNLOAD_CAP = 64 * 1024 * 1024;
/** Upload chunk: 4 MiB of bytes (≈5.4 MiB of base64), well under the write route's body limit. */
export const UPLOAD_CHUNK = 4 * 1024 * 1024;

/** Bytes moved so far and the total when known (downloads: the file's size as the first range reports it). */
export type Progress = (done: number, total: number | null) => void;

export interface ComputerOptions {
  apiKey: string;
  baseUrl: string;
  /** Attempts for compute_unavailable (503) before giving up (default 5). */
  retries?: number;
  /** Cap on a Retry-After-less backoff step, ms (default 8000). */
  maxBackoffMs?: number;
  /** Injected fetch (tests, proxies). */
  fetch?: typeof fetch;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Computer {
  readonly baseUrl: string;
  private readonly key: string;
  private readonly retries: number;
  private readonly maxBackoffMs: number;
  private readonly doFetch: typeof fetch;

  constructor(o: ComputerOptions) {
    this.baseUrl = o.baseUrl.replace(/\/+$/, '');
    this.key = o.apiKey;
    this.retries = o.retries ?? 5;
    this.maxBackoffMs = o.maxBackoffMs ?? 8000;
    this.doFetch = o.fetch ?? fetch;
  }

  /** The gateway's origin (ws:// or wss://) and the credential header its handshakes carry. */
  gateway(): { wsBase: string; headers: Record<string, string> } {
    return { wsBase: this.baseUrl.replace(/^http/, 'ws'), headers: { authorization: `Bearer ${this.key}` } };
  }

  /** One API call; 503 compute_unavailable is retried with backoff, honoring Retry-After (seconds). */
  async request<T>(method: string, path: string, o: { query?: Record<string, string | number | boolean | undefined>; body?: unknown; headers?: Record<string, string> } = {}): Promise<T> {
    const url = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(o.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { authorization: `Bearer ${this.key}`, ...o.headers };
    if (o.body !== undefined) headers['content-type'] = 'application/json';
    for (let attempt = 0; ; attempt++) {
      const res = await this.doFetch(url, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) });
      if (res.ok) return (res.status === 204 ? undefined : await res.json()) as T;
      const env: ErrorBody = errorFromBody(res.status, await res.text());
      if (env.code === 'compute_unavailable' && attempt + 1 < this.retries) {
        const after = Number(res.headers.get('retry-after'));
        await sleep(Number.isFinite(after) && after > 0 ? after * 1000 : Math.min(this.maxBackoffMs, 250 * 2 ** attempt));
        continue;
      }
      throw new ComputerError(res.status, env);
    }
  }

  machine(id: string): MachineHandle {
    return new MachineHandle(this, id);
  }

  async createMachine(req: z.input<typeof CreateMachineRequest> = {}): Promise<MachineHandle> {
    const m = await this.request<z.infer<typeof Machine>>('POST', '/v1/machines', { body: req });
    return new MachineHandle(this, m.id, m);
  }

  listMachines(q: { limit?: number; cursor?: string; state?: string } = {}) {
    return this.request<z.infer<typeof MachinePage>>('GET', '/v1/machines', { query: q });
  }

  /** Waits for the capture by default (`?wait=true`): answers a ready snapshot. */
  createSnapshot(machineId: string, o: { name?: string; wait?: boolean } = {}) {
    return this.request<z.infer<typeof Snapshot>>('POST', '/v1/snapshots', { query: { wait: o.wait ?? true }, body: { machine_id: machineId, name: o.name } });
  }

  listSnapshots(q: { limit?: number; cursor?: string; machine_id?: string; origin?: z.infer<typeof SnapshotListQuery>['origin'] } = {}) {
    return this.request<z.infer<typeof SnapshotPage>>('GET', '/v1/snapshots', { query: q });
  }

  getSnapshot(id: string) {
    return this.request<z.infer<typeof Snapshot>>('GET', `/v1/snapshots/${encodeURIComponent(id)}`);
  }

  deleteSnapshot(id: string) {
    return this.request<void>('DELETE', `/v1/snapshots/${encodeURIComponent(id)}`);
  }
}

export class MachineHandle {
  constructor(readonly client: Computer, readonly id: string, readonly record?: z.infer<typeof Machine>) {}
  private p(rest = '') {
    return `/v1/machines/${encodeURIComponent(this.id)}${rest}`;
  }
  get() {
    return this.client.request<z.infer<typeof Machine>>('GET', this.p());
  }
  start() {
    return this.client.request<z.infer<typeof Machine>>('POST', this.p('/start'));
  }
  stop() {
    return this.client.request<z.infer<typeof Machine>>('POST', this.p('/stop'));
  }
  delete() {
    return this.client.request<void>('DELETE', this.p());
  }
  exec(req: z.input<typeof ExecRequest>) {
    return this.client.request<z.infer<typeof ExecResult>>('POST', this.p('/exec'), { body: req });
  }
  /** PNG (or jpeg/webp) bytes of the screen. */
  async screenshot(q: { format?: 'png' | 'jpeg' | 'webp'; quality?: number } = {}): Promise<Buffer> {
    const r = await this.client.request<z.infer<typeof ScreenshotResult>>('GET', this.p('/screenshot'), { query: q });
    return Buffer.from(r.image, 'base64');
  }
  writeFile(path: string, content: string | Buffer, o: { user?: 'agent' | 'root'; append?: boolean; mode?: string } = {}) {
    const b64 = typeof content !== 'string';
    return this.client.request<z.infer<typeof WriteResult>>('PUT', this.p('/files/content'), {
      query: { path },
      body: { content: b64 ? content.toString('base64') : content, encoding: b64 ? 'base64' : 'utf8', user: o.user, append: o.append, mode: o.mode },
    });
  }
  /**
   * Writes any number of bytes: the first chunk replaces the file, later ones append, so a file
   * larger than one write's limit arrives whole. Not atomic: an interrupted upload leaves a prefix.
   */
  async uploadFile(path: string, bytes: Buffer, o: { user?: 'agent' | 'root'; mode?: string; onProgress?: Progress } = {}): Promise<void> {
    let off = 0;
    do {
      const chunk = bytes.subarray(off, off + UPLOAD_CHUNK);
      await this.writeFile(path, chunk, { user: o.user, mode: o.mode, append: off > 0 });
      off += chunk.length;
      o.onProgress?.(off, bytes.length);
    } while (off < bytes.length);
  }
  /**
   * Reads a whole file by looping ranges until `eof`. Refuses past `maxBytes` (64 MiB by default;
   * raise it for bigger files) rather than buffering without bound.
   */
  async readFile(path: string, o: { maxBytes?: number; user?: 'agent' | 'root'; onProgress?: Progress } = {}): Promise<Buffer> {
    const cap = o.maxBytes ?? DEFAULT_DOWNLOAD_CAP;
    const parts: Buffer[] = [];
    let offset = 0;
    for (;;) {
      const r = await this.client.request<z.infer<typeof ReadResult>>('GET', this.p('/files/content'), { query: { path, offset, encoding: 'base64', user: o.user } });
      const chunk = Buffer.from(r.content, 'base64');
      offset += chunk.length;
      if (offset > cap) throw new ComputerError(413, { code: 'invalid_request', message: `${path} is larger than the download cap of ${cap} bytes; raise maxBytes.`, request_id: '', details: [], quota: null });
      parts.push(chunk);
      o.onProgress?.(offset, r.size > 0 ? r.size : null);
      if (r.eof || chunk.length === 0) return Buffer.concat(parts);
    }
  }
  /**
   * Acquires the input lease and renews it at half its ttl until `release()`; `fence` follows renewals.
   */
  async acquireLease(sessionId: string, ttlSeconds = 60): Promise<Lease> {
    const grant = await this.client.request<z.infer<typeof LeaseGrant>>('POST', this.p('/input-lease'), { body: { session_id: sessionId, ttl_seconds: ttlSeconds } });
    return new Lease(this, sessionId, ttlSeconds, grant);
  }
  /** A session on this machine (`agent` for programs, `human` for people); input needs one holding the lease. */
  openSession(type: 'agent' | 'human' = 'agent') {
    return this.client.request<z.infer<typeof Session>>('POST', '/v1/sessions', { body: { machine_id: this.id, type } });
  }
  /** Opens an agent session and takes the input lease with it (renewed until `release()`). */
  async control(ttlSeconds = 60): Promise<Lease> {
    return this.acquireLease((await this.openSession('agent')).id, ttlSeconds);
  }
  /** A new machine from one of this machine's snapshots, or from its disk as it is now. */
  async fork(req: z.input<typeof ForkMachineRequest> = {}): Promise<MachineHandle> {
    const m = await this.client.request<z.infer<typeof Machine>>('POST', this.p('/fork'), { body: req });
    return new MachineHandle(this.client, m.id, m);
  }
  /** Puts the machine's disk back to a snapshot (the current disk is kept as a `restore` snapshot). */
  restore(snapshotId: string) {
    return this.client.request<z.infer<typeof Machine>>('POST', this.p('/restore'), { body: { snapshot_id: snapshotId } });
  }
  listPorts(q: { limit?: number; cursor?: string } = {}) {
    return this.client.request<z.infer<typeof PreviewPage>>('GET', this.p('/ports'), { query: q });
  }
  /** The answer of the call that published carries `secret`/`access_url` once; later reads do not. */
  publishPort(req: z.input<typeof PublishPortRequest>) {
    return this.client.request<z.infer<typeof Preview>>('POST', this.p('/ports'), { body: req });
  }
  unpublishPort(previewId: string) {
    return this.client.request<void>('DELETE', this.p(`/ports/${encodeURIComponent(previewId)}`));
  }
  listSecrets() {
    return this.client.request<z.infer<typeof MachineSecretList>>('GET', this.p('/secrets'));
  }
  setSecret(name: string, value: string) {
    return this.client.request<z.infer<typeof Secret>>('PUT', this.p('/secrets'), { body: { name, value } });
  }
  deleteSecret(name: string) {
    return this.client.request<void>('DELETE', this.p(`/secrets/${encodeURIComponent(name)}`));
  }
  /** A pty in the machine (the user's login shell unless `command`); attach with `attachTerminal`. */
  openTerminal(req: z.input<typeof PtyOpen> = {}) {
    return this.client.request<z.infer<typeof Terminal>>('POST', this.p('/terminals'), { body: req });
  }
  killTerminal(termId: string) {
    return this.client.request<void>('DELETE', this.p(`/terminals/${encodeURIComponent(termId)}`));
  }
  /** The terminal channel as a duplex byte stream (see TerminalStream). */
  attachTerminal(termId: string): Promise<TerminalStream> {
    const g = this.client.gateway();
    return attachTerminal(`${g.wsBase}${this.p(`/terminals/${encodeURIComponent(termId)}/attach`)}`, g.headers);
  }
  /**
   * Screen frames (the gateway's screen channel) as an async iterator of encoded images; `break` or
   * `close()` ends it. A refused handshake rejects with the envelope's ComputerError. Always the `frames`
   * encoding (whole images a program can save or hand to a model): `tiles` would need an image decoder to
   * composite, which the SDK does not depend on (docs/gateway.md "Screen encodings").
   */
  async screenFrames(q: { format?: 'jpeg' | 'webp'; quality?: number; fps?: number; onStatus?: (s: ScreenStream['status'] & {}) => void } = {}): Promise<ScreenStream> {
    const g = this.client.gateway();
    const url = new URL(`${g.wsBase}${this.p('/screen')}`);
    for (const k of ['format', 'quality', 'fps'] as const) if (q[k] !== undefined) url.searchParams.set(k, String(q[k]));
    let stream!: ScreenStream;
    const { onStatus } = q;
    await openChannel(url.href, g.headers, (ws) => (stream = new ScreenStream(ws, onStatus)));
    return stream;
  }
  /**
   * The machine's events, live, as an async iterator that reconnects by itself and resumes from the last
   * event it yielded (no gap, no repeat). `cursor` starts after a known event (a `cursor` yielded
   * earlier, e.g. persisted by the caller); without it, events from now on.
   */
  events(o: { cursor?: string; maxReconnects?: number } = {}): Promise<EventStream> {
    const g = this.client.gateway();
    const base = `${g.wsBase}${this.p('/events/live')}`;
    return new EventStream((c) => (c ? `${base}?cursor=${encodeURIComponent(c)}` : base), g.headers, o).start();
  }
  /** @internal */
  path(rest: string) {
    return this.p(rest);
  }
}

export class Lease {
  private timer: NodeJS.Timeout | undefined;
  renewals = 0;
  lastError: unknown = null;
  constructor(private readonly m: MachineHandle, readonly sessionId: string, readonly ttlSeconds: number, public grant: z.infer<typeof LeaseGrant>) {
    this.schedule();
  }
  private schedule() {
    this.timer = setTimeout(() => void this.renew(), (this.ttlSeconds * 1000) / 2);
    this.timer.unref?.();
  }
  private async renew() {
    try {
      this.grant = await this.m.client.request('POST', this.m.path('/input-lease'), { body: { session_id: this.sessionId, ttl_seconds: this.ttlSeconds } });
      this.renewals++;
      this.schedule();
    } catch (e) {
      this.lastError = e;
    }
  }
  get fence(): number {
    return this.grant.fence;
  }
  /** Headers an input call carries while holding the lease. */
  headers(): Record<string, string> {
    return { 'x-session-id': this.sessionId, 'x-lease-fence': String(this.grant.fence) };
  }
  /** Types text on the focused window (any Unicode; a newline is not Enter, use `key('Return')`). */
  type(text: string, o: { delay_ms?: number } = {}) {
    return this.m.client.request<unknown>('POST', this.m.path('/keyboard/type'), { body: { text, ...o }, headers: this.headers() });
  }
  /** Presses a key (X keysym name: `Return`, `Tab`, `ctrl+c` is a hotkey, see the API reference). */
  key(key: string, o: { repeat?: number } = {}) {
    return this.m.client.request<unknown>('POST', this.m.path('/keyboard/key'), { body: { key, ...o }, headers: this.headers() });
  }
  /** Clicks at (x, y) on the screen. */
  click(x: number, y: number, o: { button?: 'left' | 'middle' | 'right'; count?: number } = {}) {
    return this.m.client.request<unknown>('POST', this.m.path('/mouse/click'), { body: { at: { x, y }, ...o }, headers: this.headers() });
  }
  async release(): Promise<void> {
    clearTimeout(this.timer);
    await this.m.client.request('DELETE', this.m.path('/input-lease'), { query: { session_id: this.sessionId } });
  }
}

export { TerminalStream } from './terminal.js';
export { ChannelClosedError, EventStream, ScreenStream, type EventDelivery, type MachineEvent, type ScreenFrame } from './channels.js';
