/**
 * Reading a transfer body in pieces of known length: the header by exact reads, each frame's payload as a
 * bounded slice that yields exactly its announced bytes (never one more: the next frame's bytes stay for the
 * next slice) and reports how many it got when the body ends first.
 */
export class ByteReader {
  private readonly it: AsyncIterator<Buffer>;
  private pending: Buffer = Buffer.alloc(0);
  private ended = false;

  /** `source`: an HTTP request, a Readable, any iterable of byte chunks. */
  constructor(source: AsyncIterable<Buffer | Uint8Array | string>) {
    const inner = source[Symbol.asyncIterator]();
    this.it = {
      next: async () => {
        const r = await inner.next();
        if (r.done) return { done: true, value: undefined };
        return { done: false, value: typeof r.value === 'string' ? Buffer.from(r.value) : Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength) };
      },
      return: async () => {
        await inner.return?.();
        return { done: true, value: undefined };
      },
    };
  }

  /** The next chunk of at most `max` bytes, or null at the end of the body. */
  private async chunk(max: number): Promise<Buffer | null> {
    if (!this.pending.length) {
      if (this.ended) return null;
      const r = await this.it.next();
      if (r.done) {
        this.ended = true;
        return null;
      }
      this.pending = r.value;
    }
    const out = this.pending.subarray(0, max);
    this.pending = this.pending.subarray(out.length);
    return out;
  }

  /** Exactly `n` bytes, or null when the body ends first. */
  async readExactly(n: number): Promise<Buffer | null> {
    const parts: Buffer[] = [];
    let got = 0;
    while (got < n) {
      const c = await this.chunk(n - got);
      if (!c) return null;
      if (!c.length) continue;
      parts.push(c);
      got += c.length;
    }
    return Buffer.concat(parts, n);
  }

  /**
   * The next `n` bytes as chunks. `onChunk` sees each before it is yielded; the slice's `got` says how many came,
   * so a consumer that finds the generator ended early knows the body was cut short.
   */
  slice(n: number, onChunk: (c: Buffer) => void): { chunks: AsyncGenerator<Buffer>; got: () => number } {
    let got = 0;
    const self = this;
    async function* chunks(): AsyncGenerator<Buffer> {
      while (got < n) {
        const c = await self.chunk(n - got);
        if (!c) return;
        if (!c.length) continue;
        got += c.length;
        onChunk(c);
        yield c;
      }
    }
    return { chunks: chunks(), got: () => got };
  }

  /** Whether the body has nothing left (reads one more chunk to know). */
  async atEnd(): Promise<boolean> {
    for (;;) {
      const c = await this.chunk(1);
      if (!c) return true;
      if (!c.length) continue;
      this.pending = Buffer.concat([c, this.pending]);
      return false;
    }
  }

  /** Stop reading the body (the source is told to end). */
  async close(): Promise<void> {
    this.ended = true;
    await this.it.return?.();
  }
}
