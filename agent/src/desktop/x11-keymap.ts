/**
 * A minimal X11 protocol client that does exactly four things: read the core keyboard mapping,
 * change it, notice when anyone (setxkbmap, xmodmap, us) changed it (MappingNotify is sent to every
 * client without selecting it), and read the pointer position. It exists so keyboard input can be
 * resolved to keycodes from a mapping that is always current, in well under a millisecond, without
 * a process spawn (xdotool caches the mapping at its start and never refreshes it), and so the
 * pointer is read without walking the window tree.
 *
 * Only unauthenticated local connections are supported (the guest's Xvfb runs without -auth).
 */
import net from 'node:net';

export interface KeyboardMapping {
  minKeycode: number;
  maxKeycode: number;
  keysymsPerKeycode: number;
  /** keysyms[(keycode - minKeycode) * keysymsPerKeycode + level]; 0 is NoSymbol. */
  keysyms: Uint32Array;
}

const OP_QUERY_POINTER = 38;
const OP_CHANGE_KEYBOARD_MAPPING = 100;
const OP_GET_KEYBOARD_MAPPING = 101;
const EVENT_MAPPING_NOTIFY = 34;
const SETUP_TIMEOUT_MS = 5_000;

interface Pending {
  seq: number;
  resolve(buf: Buffer): void;
  reject(err: Error): void;
}

export class X11KeymapClient {
  private sock: net.Socket;
  private buf: Buffer = Buffer.alloc(0);
  private setupDone = false;
  private seq = 0;
  private pending: Pending[] = [];
  private closed = false;
  minKeycode = 8;
  maxKeycode = 255;
  /** Root window of the first screen. */
  root = 0;
  /** Bumped on every MappingNotify (keyboard or modifier) and on connection loss. */
  generation = 0;
  private onSetup!: { resolve(): void; reject(e: Error): void };

  private constructor(socketPath: string, private readonly onChange: () => void) {
    this.sock = net.connect(socketPath);
    this.sock.on('data', (d: Buffer) => this.onData(d));
    this.sock.on('error', (e) => this.fail(e));
    this.sock.on('close', () => this.fail(new Error('X connection closed')));
  }

  static connect(displayNumber: number, onChange: () => void = () => {}): Promise<X11KeymapClient> {
    const c = new X11KeymapClient(`/tmp/.X11-unix/X${displayNumber}`, onChange);
    return new Promise((resolve, reject) => {
      // A server that accepts but never answers (wedged, or a stale socket being reused) must not
      // block the desktop's state checks forever.
      const timer = setTimeout(() => {
        reject(new Error('X server did not answer the connection setup'));
        c.close();
      }, SETUP_TIMEOUT_MS);
      c.onSetup = {
        resolve: () => {
          clearTimeout(timer);
          resolve(c);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      c.sock.once('connect', () => {
        // Little-endian, protocol 11.0, no authorization.
        const req = Buffer.alloc(12);
        req[0] = 0x6c;
        req.writeUInt16LE(11, 2);
        req.writeUInt16LE(0, 4);
        c.sock.write(req);
      });
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  close(): void {
    this.closed = true;
    this.sock.destroy();
  }

  private fail(err: Error): void {
    if (!this.setupDone) this.onSetup?.reject(err);
    if (!this.closed) {
      this.closed = true;
      this.generation++;
      this.onChange();
    }
    for (const p of this.pending.splice(0)) p.reject(err);
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    if (!this.setupDone) {
      if (this.buf.length < 8) return;
      const total = 8 + this.buf.readUInt16LE(6) * 4;
      if (this.buf.length < total) return;
      const status = this.buf[0];
      if (status !== 1) {
        this.onSetup.reject(new Error('X server refused the connection (authorization required?)'));
        this.close();
        return;
      }
      this.minKeycode = this.buf[34]!;
      this.maxKeycode = this.buf[35]!;
      // The first SCREEN follows the vendor string (padded to 4) and the 8-byte pixmap formats.
      const vendorLen = this.buf.readUInt16LE(24);
      const formats = this.buf[29]!;
      this.root = this.buf.readUInt32LE(40 + Math.ceil(vendorLen / 4) * 4 + 8 * formats);
      this.buf = this.buf.subarray(total);
      this.setupDone = true;
      this.onSetup.resolve();
    }
    for (;;) {
      if (this.buf.length < 32) return;
      const kind = this.buf[0]!;
      let total = 32;
      if (kind === 1 || kind === 35) total += this.buf.readUInt32LE(4) * 4;
      if (this.buf.length < total) return;
      const msg = this.buf.subarray(0, total);
      this.buf = this.buf.subarray(total);
      if (kind === 0) {
        const seq = msg.readUInt16LE(2);
        const p = this.takePending(seq);
        p?.reject(new Error(`X error ${msg[1]} (request ${msg[10]})`));
      } else if (kind === 1) {
        const p = this.takePending(msg.readUInt16LE(2));
        p?.resolve(Buffer.from(msg));
      } else if ((kind & 0x7f) === EVENT_MAPPING_NOTIFY) {
        this.generation++;
        this.onChange();
      }
    }
  }

  /** Replies come in request order; requests without replies before it just completed. */
  private takePending(seq: number): Pending | undefined {
    while (this.pending.length) {
      const p = this.pending[0]!;
      if (p.seq === seq) return this.pending.shift();
      // A pending reply with an older sequence number can no longer arrive.
      if (((seq - p.seq) & 0xffff) < 0x8000) {
        this.pending.shift();
        p.reject(new Error('X reply lost'));
        continue;
      }
      return undefined;
    }
    return undefined;
  }

  private send(req: Buffer, expectReply: boolean): Promise<Buffer> | void {
    if (this.closed) throw new Error('X connection closed');
    this.seq = (this.seq + 1) & 0xffff;
    const seq = this.seq;
    this.sock.write(req);
    if (!expectReply) return;
    return new Promise((resolve, reject) => this.pending.push({ seq, resolve, reject }));
  }

  /** Pointer position on the root window. */
  async queryPointer(): Promise<{ x: number; y: number }> {
    const req = Buffer.alloc(8);
    req[0] = OP_QUERY_POINTER;
    req.writeUInt16LE(2, 2);
    req.writeUInt32LE(this.root, 4);
    const reply = (await this.send(req, true))!;
    return { x: reply.readInt16LE(16), y: reply.readInt16LE(18) };
  }

  async getMapping(): Promise<KeyboardMapping> {
    const count = this.maxKeycode - this.minKeycode + 1;
    const req = Buffer.alloc(8);
    req[0] = OP_GET_KEYBOARD_MAPPING;
    req.writeUInt16LE(2, 2);
    req[4] = this.minKeycode;
    req[5] = count;
    const reply = (await this.send(req, true))!;
    const kpk = reply[1]!;
    const n = reply.readUInt32LE(4);
    const keysyms = new Uint32Array(n);
    for (let i = 0; i < n; i++) keysyms[i] = reply.readUInt32LE(32 + i * 4);
    return { minKeycode: this.minKeycode, maxKeycode: this.maxKeycode, keysymsPerKeycode: kpk, keysyms };
  }

  /**
   * Set each entry's keycode to its `levels` (keysymsPerKeycode keysyms): one ChangeKeyboardMapping per
   * run of adjacent keycodes (each is one MappingNotify to every client), all sent before the one round
   * trip that reads the new mapping back. Resolves once the server has applied them, so input sent
   * afterwards on another connection sees them.
   */
  async bind(entries: Array<{ keycode: number; levels: number[] }>, keysymsPerKeycode: number): Promise<KeyboardMapping> {
    const sorted = [...entries].sort((a, b) => a.keycode - b.keycode);
    for (let i = 0; i < sorted.length; ) {
      let j = i + 1;
      while (j < sorted.length && sorted[j]!.keycode === sorted[j - 1]!.keycode + 1) j++;
      const run = sorted.slice(i, j);
      const req = Buffer.alloc(8 + run.length * keysymsPerKeycode * 4);
      req[0] = OP_CHANGE_KEYBOARD_MAPPING;
      req[1] = run.length;
      req.writeUInt16LE(2 + run.length * keysymsPerKeycode, 2);
      req[4] = run[0]!.keycode;
      req[5] = keysymsPerKeycode;
      run.forEach((e, r) => {
        for (let l = 0; l < keysymsPerKeycode; l++) req.writeUInt32LE(e.levels[l] ?? 0, 8 + (r * keysymsPerKeycode + l) * 4);
      });
      this.send(req, false);
      i = j;
    }
    return this.getMapping();
  }
}
