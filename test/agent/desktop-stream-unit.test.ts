/** The stream's pacing logic in isolation: a fake screen source and a writable that drains on command. */
import t from 'tap';
import { Writable } from 'node:stream';
import { ScreenStreamDecoder } from '../../shared/agent-protocol.js';
import { runScreenStream, type StreamSource } from '../../agent/src/desktop/stream.js';
import { waitFor } from '../helpers/desktop-agent.js';

function fakeSource(opts: { changing: boolean }) {
  let n = 0;
  let listener: (() => void) | null = null;
  const src = {
    isUp: true,
    state: { width: 8, height: 4, up: true, resizable: true },
    captures: 0,
    async capture() {
      src.captures++;
      const rgb = Buffer.alloc(8 * 4 * 3, opts.changing ? n++ % 256 : 7);
      return { width: 8, height: 4, rgb };
    },
    releaseFrame() {},
    onChange(fn: () => void) {
      listener = fn;
      return () => {
        listener = null;
      };
    },
    fire() {
      listener?.();
    },
  };
  return src;
}

class HeldWritable extends Writable {
  chunks: Buffer[] = [];
  held: Array<() => void> = [];
  hold = true;
  constructor() {
    super({ highWaterMark: 1 });
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void) {
    this.chunks.push(chunk);
    if (this.hold) this.held.push(() => cb());
    else cb();
  }
  release() {
    this.hold = false;
    for (const cb of this.held.splice(0)) cb();
  }
  messages() {
    return new ScreenStreamDecoder().push(Buffer.concat(this.chunks));
  }
}

t.test('backpressure: frames are skipped while the reader is full, not queued', async (t) => {
  const src = fakeSource({ changing: true });
  const out = new HeldWritable();
  const stop = runScreenStream(src as unknown as StreamSource, out, { format: 'jpeg', quality: 50, fps: 30 });
  t.teardown(stop);
  // The first write (the status) fills the 1-byte buffer: nothing else may be written until drain.
  await waitFor(() => src.captures >= 0 && out.chunks.length >= 1);
  await new Promise((r) => setTimeout(r, 300));
  t.equal(out.chunks.length, 1, 'only the status was written while blocked');
  t.equal(src.captures, 0, 'no capture work while blocked');
  out.release();
  await waitFor(() => out.messages().filter((m) => m.header.type === 'frame').length >= 3);
  const msgs = out.messages();
  t.equal(msgs[0]!.header.type, 'status');
  t.ok(msgs.filter((m) => m.header.type === 'frame').every((m, i) => m.header.type === 'frame' && m.header.seq === i));
});

t.test('a tick that outlasts the interval is followed at once by the tick it held up, not at the boundary after', async (t) => {
  // fps 1: a tick every 1000 ms. The first capture is held until the interval has fired during it (the
  // test's 1100 ms timer is due after the interval's 1000 ms one, so it runs after it). When the first frame
  // is written, the second capture must already have started: with plain interval skipping it would wait
  // for the boundary at 2000 ms (halving the rate of a stream whose ticks run just over 1000 / fps ms).
  let captures = 0;
  let release: (() => void) | null = null;
  const src = {
    isUp: true,
    state: { width: 8, height: 4, up: true, resizable: true },
    async capture() {
      captures++;
      if (captures === 1) await new Promise<void>((r) => (release = r));
      return { width: 8, height: 4, rgb: Buffer.alloc(8 * 4 * 3, captures) };
    },
    releaseFrame() {},
    onChange: () => () => {},
  };
  let capturesAtFirstFrame = -1;
  const out = new Writable({
    write(chunk: Buffer, _enc, cb) {
      // The first frame (after the status): what has happened once the stream's own continuations ran.
      const frame = new ScreenStreamDecoder().push(chunk).some((m) => m.header.type === 'frame');
      if (frame && capturesAtFirstFrame < 0) setImmediate(() => (capturesAtFirstFrame = captures));
      cb();
    },
  });
  const stop = runScreenStream(src as unknown as StreamSource, out, { format: 'jpeg', quality: 50, fps: 1 });
  t.teardown(stop);
  await waitFor(() => release !== null);
  await new Promise((r) => setTimeout(r, 1100));
  release!();
  await waitFor(() => capturesAtFirstFrame >= 0);
  t.equal(capturesAtFirstFrame, 2, 'the held-up tick ran as soon as the slow one ended');
});

t.test('an unchanged screen sends no frames, only keepalives', async (t) => {
  const src = fakeSource({ changing: false });
  const out = new HeldWritable();
  out.release();
  const stop = runScreenStream(src as unknown as StreamSource, out, { format: 'jpeg', quality: 50, fps: 30, keepaliveMs: 100 });
  t.teardown(stop);
  await waitFor(() => out.messages().filter((m) => m.header.type === 'keepalive').length >= 2);
  const frames = out.messages().filter((m) => m.header.type === 'frame');
  t.equal(frames.length, 1, 'one frame for the first capture, none for identical ones');
  t.ok(src.captures > 2, 'the screen was captured again');
});

t.test('status changes are sent and the stream stops when the reader goes away', async (t) => {
  const src = fakeSource({ changing: false });
  const out = new HeldWritable();
  out.release();
  runScreenStream(src as unknown as StreamSource, out, { format: 'webp', quality: 50, fps: 30 });
  await waitFor(() => out.messages().some((m) => m.header.type === 'frame'));
  src.isUp = false;
  src.state = { width: 8, height: 4, up: false, resizable: false };
  src.fire();
  await waitFor(() => out.messages().some((m) => m.header.type === 'status' && !m.header.up));
  out.destroy();
  await new Promise((r) => setTimeout(r, 50));
  const captures = src.captures;
  src.isUp = true;
  src.state = { width: 8, height: 4, up: true, resizable: true };
  await new Promise((r) => setTimeout(r, 200));
  t.equal(src.captures, captures, 'no capture after the reader left');
});
