/**
 * The proxy's open connections: per preview, how to cut each one (unpublishing cuts them all at once),
 * and each one's measure (the bytes it holds in the control plane, its stream's receive window left).
 */
import type http2 from 'node:http2';

export class PreviewConnections {
  /** Per preview: how to cut each of its open connections. */
  private readonly live = new Map<string, Set<() => void>>();
  /** Each open connection's measure: the bytes it holds, and its stream's receive window left. */
  private readonly meters = new Set<() => { held: number; windowLeft: number }>();

  /** Registers how to cut one connection of preview `id`; the returned call forgets it. */
  track(id: string, cut: () => void): () => void {
    let set = this.live.get(id);
    if (!set) this.live.set(id, (set = new Set()));
    set.add(cut);
    return () => {
      set!.delete(cut);
      if (set!.size === 0 && this.live.get(id) === set) this.live.delete(id);
    };
  }

  /** Meters the connection of `stream` (with its client-side socket or response) until the returned call. */
  meter(stream: http2.ClientHttp2Stream, client: { readonly writableLength: number }, clientIn: { readonly readableLength: number }): () => void {
    const m = () => ({
      held: stream.readableLength + stream.writableLength + client.writableLength + clientIn.readableLength,
      windowLeft: stream.state?.localWindowSize ?? -1,
    });
    this.meters.add(m);
    return () => this.meters.delete(m);
  }

  /** Cuts every open connection of preview `id`. */
  cut(id: string): void {
    const cuts = this.live.get(id);
    this.live.delete(id);
    for (const cut of cuts ?? []) cut();
  }

  cutAll(): void {
    for (const cuts of this.live.values()) for (const cut of cuts) cut();
    this.live.clear();
  }

  open(): number {
    let n = 0;
    for (const s of this.live.values()) n += s.size;
    return n;
  }

  buffered(): number {
    let n = 0;
    for (const m of this.meters) n += m().held;
    return n;
  }

  stalled(): number {
    let n = 0;
    for (const m of this.meters) if (m().windowLeft === 0) n++;
    return n;
  }
}
