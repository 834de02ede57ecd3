/**
 * The live screen (gateway screen channel) on a canvas scaled to fit, with its connection state always
 * shown, and taking control: a `human` session, the input lease taken with force, pointer and keyboard
 * over the input channel with the lease's fence, "control lost" (and who holds it) on lease_lost.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { InputServerMessage, ScreenStatusMessage } from '../../../../shared/schemas/gateway.js';
import { decodeScreenTilesMessage, type ScreenTilesMessage } from '../../../../shared/screen-tiles.js';
import { api, errorText, openChannel } from '../api.js';
import { keyMessage } from '../keys.js';
import { watchEvents } from '../machine-events.js';
import { connLabel, leaseLossFrom, toDesktop, type Socket } from '../view-logic.js';
import type { LeaseGrant, LeaseState, Machine, Session } from '../types.js';

type Control = { kind: 'view' } | { kind: 'taking' } | { kind: 'control'; fence: number } | { kind: 'lost'; holder: string; why: string };

const RENEW_MS = 20_000;
const SCREEN_FPS = 30;

/** One `tiles`-encoded message onto the canvas: a key frame replaces it, a delta copies then paints. */
async function paint(c: HTMLCanvasElement | null, msg: ScreenTilesMessage): Promise<void> {
  const type = `image/${msg.header.format}`;
  const bitmaps = await Promise.all(msg.images.map((i) => createImageBitmap(new Blob([i.data], { type }))));
  try {
    if (!c) return;
    const { width, height } = msg.header;
    if (c.width !== width || c.height !== height) {
      c.width = width;
      c.height = height;
    }
    const ctx = c.getContext('2d')!;
    const copy = msg.header.type === 'tiles' ? msg.header.copy : null;
    // The canvas as its own source: drawn from a snapshot of itself, so overlapping areas are safe.
    if (copy) ctx.drawImage(c, copy.sx, copy.sy, copy.w, copy.h, copy.x, copy.y, copy.w, copy.h);
    msg.images.forEach((img, i) => ctx.drawImage(bitmaps[i]!, img.x, img.y));
  } finally {
    for (const b of bitmaps) b.close();
  }
}

export function Screen({ machine }: { machine: Machine }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const [socket, setSocket] = useState<Socket>('connecting');
  const conn = connLabel(socket, machine.state);
  const [detail, setDetail] = useState<string | null>(null);

  // The screen channel, reconnected with a growing delay while the page is open.
  useEffect(() => {
    let ws: WebSocket | null = null;
    let closed = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let attempt = 0;
    let drawing = Promise.resolve();
    const connect = () => {
      // Tiles: only what changed is sent (docs/gateway.md "Screen encodings"), painted onto the canvas.
      ws = openChannel(`/v1/machines/${machine.id}/screen?format=jpeg&quality=70&fps=${SCREEN_FPS}&encoding=tiles`);
      if (!ws) return;
      ws.binaryType = 'arraybuffer';
      ws.onmessage = (ev) => {
        if (typeof ev.data === 'string') {
          const st = JSON.parse(ev.data) as ScreenStatusMessage;
          if (st.type !== 'status') return;
          attempt = 0;
          const c = canvas.current;
          if (c && st.width && (c.width !== st.width || c.height !== st.height)) {
            c.width = st.width;
            c.height = st.height;
          }
          setSocket(st.up ? 'up' : 'down');
          setDetail(st.up ? null : st.message);
          return;
        }
        const msg = decodeScreenTilesMessage(new Uint8Array(ev.data as ArrayBuffer));
        // Messages are painted in order (a delta applies to the picture before it); a slow decode never
        // reorders them. Each message's images are decoded first, then painted together.
        drawing = drawing.then(() => paint(canvas.current, msg)).catch(() => {});
      };
      ws.onclose = (ev) => {
        if (closed) return;
        if (ev.code === 4404) {
          setSocket('deleted');
          return;
        }
        setSocket('reconnecting');
        retry = setTimeout(connect, Math.min(5000, 500 * 2 ** attempt++));
      };
    };
    connect();
    return () => {
      closed = true;
      clearTimeout(retry);
      ws?.close();
    };
  }, [machine.id]);

  const control = useControl(machine, canvas);
  const live = conn === 'live';
  return (
    <div class="screen">
      <div class="screen-bar">
        <span class={`conn conn-${conn.replace(' ', '-')}`} role="status" aria-label="Screen connection" data-conn={conn}>
          {conn === 'live' ? 'Live' : conn[0]!.toUpperCase() + conn.slice(1)}
          {detail && conn !== 'live' ? ` — ${detail}` : ''}
        </span>
        <span class="control-state" role="status" aria-label="Control" data-control={control.state.kind}>
          {control.state.kind === 'view' && 'View only'}
          {control.state.kind === 'taking' && 'Taking control…'}
          {control.state.kind === 'control' && 'You have control'}
          {control.state.kind === 'lost' && `Control lost: ${control.state.holder} (${control.state.why})`}
        </span>
        {/*
          Two elements (keys), and a click that is the second of a double click is not a new decision: the
          re-render that ends a takeover puts Release where Take control was, under the pointer.
        */}
        {control.state.kind === 'control' ? (
          <button key="release" type="button" onClick={(e) => e.detail <= 1 && void control.release()}>Release</button>
        ) : (
          <button key="take" type="button" disabled={control.state.kind === 'taking' || machine.state !== 'running'} onClick={(e) => e.detail <= 1 && void control.take()}>
            Take control
          </button>
        )}
        {control.error && <span role="alert" class="error">{control.error}</span>}
      </div>
      <div class={`screen-frame ${live ? '' : 'dim'}`}>
        <canvas
          ref={canvas}
          width={1280}
          height={800}
          role="img"
          aria-label={`Screen of ${machine.name}`}
          tabIndex={control.state.kind === 'control' ? 0 : -1}
          class={control.state.kind === 'control' ? 'controlling' : ''}
          {...control.handlers}
        />
      </div>
    </div>
  );
}

/** What the page holds while it has (or is taking) control; all of it ends together in `drop`. */
type Held = {
  ws: WebSocket | null;
  session: string | null;
  fence: number;
  renew?: ReturnType<typeof setInterval>;
  unwatch?: () => void;
  n: number;
  lastMove: number;
};

function useControl(machine: Machine, canvas: { current: HTMLCanvasElement | null }) {
  const [state, setState] = useState<Control>({ kind: 'view' });
  const [error, setError] = useState<string | null>(null);
  const ref = useRef<Held>({ ws: null, session: null, fence: 0, n: 0, lastMove: 0 });

  const holderText = async (): Promise<string> => {
    try {
      const l = await api<LeaseState>('GET', `/v1/machines/${machine.id}/input-lease`);
      if (!l.held || !l.holder) return 'no one holds it now';
      return `held by ${l.holder.type === 'agent' ? 'an' : 'a'} ${l.holder.type} session (${l.holder.session_id}) opened by ${l.holder.opener.type === 'user' ? 'a person' : 'an API key'} ${l.holder.opener.id}`;
    } catch {
      return 'holder unknown';
    }
  };
  /** Ends the input socket, the renewal and the lease watch (the session stays, for the next take). */
  const drop = () => {
    const r = ref.current;
    clearInterval(r.renew);
    r.unwatch?.();
    r.unwatch = undefined;
    const ws = r.ws;
    r.ws = null;
    ws?.close();
  };
  /** Every way control ends without the user's Release lands here, and is shown with why. */
  const lost = async (why: string) => {
    drop();
    const holder = await holderText();
    setState({ kind: 'lost', holder, why });
  };

  const take = async () => {
    setError(null);
    setState({ kind: 'taking' });
    drop();
    const r = ref.current;
    try {
      // The lease is watched from before it is taken (the events channel carries every grant and release),
      // so a loss is shown even when nothing is being typed; this takeover's own events are not one.
      await new Promise<void>((resolve) => {
        r.unwatch = watchEvents(machine.id, {
          event(e) {
            if (!r.ws) return;
            const why = leaseLossFrom(e, r.session ?? '', r.fence);
            if (why) void lost(why);
          },
          // Open, or failed to (then input goes on without the watch: lease_lost still comes on the next input).
          conn: () => resolve(),
        });
      });
      if (!r.session) r.session = (await api<Session>('POST', '/v1/sessions', { machine_id: machine.id, type: 'human' })).id;
      // A person at the dashboard takes over from whoever holds the lease (an agent, another tab).
      const grant = await api<LeaseGrant>('POST', `/v1/machines/${machine.id}/input-lease`, { session_id: r.session, force: true, ttl_seconds: 60 });
      r.fence = grant.fence;
      const ws = openChannel(`/v1/machines/${machine.id}/input?session_id=${encodeURIComponent(r.session)}`);
      if (!ws) throw new Error('signed out');
      r.ws = ws;
      ws.onmessage = (ev) => {
        const m = JSON.parse(String(ev.data)) as InputServerMessage;
        if (m.type === 'lease_lost') void lost('lease lost');
        else if (m.type === 'error') setError(`${m.message} (${m.code})`);
      };
      ws.onclose = (ev) => {
        if (r.ws === ws) void lost(`input channel closed (${ev.code})`);
      };
      await new Promise<void>((resolve, reject) => {
        ws.onopen = () => resolve();
        ws.onerror = () => reject(new Error('the input channel did not open'));
      });
      r.renew = setInterval(() => {
        // Renewal by the holder keeps the fence; a refusal means someone else has taken it.
        api<LeaseGrant>('POST', `/v1/machines/${machine.id}/input-lease`, { session_id: r.session, ttl_seconds: 60 }).catch(() => void lost('renewal refused'));
      }, RENEW_MS);
      setState({ kind: 'control', fence: grant.fence });
      canvas.current?.focus({ preventScroll: true });
    } catch (e) {
      drop();
      setError(errorText(e));
      setState({ kind: 'view' });
    }
  };

  const release = async () => {
    const r = ref.current;
    drop();
    if (r.session) {
      await api('DELETE', `/v1/machines/${machine.id}/input-lease?session_id=${encodeURIComponent(r.session)}`).catch(() => {});
    }
    setState({ kind: 'view' });
  };

  // Leaving the page ends the session (which releases the lease).
  useEffect(() => () => {
    const r = ref.current;
    drop();
    if (r.session) void api('DELETE', `/v1/sessions/${r.session}`).catch(() => {});
  }, [machine.id]);

  const send = (msg: Record<string, unknown>) => {
    const r = ref.current;
    if (!r.ws || r.ws.readyState !== WebSocket.OPEN) return;
    r.ws.send(JSON.stringify({ ...msg, fence: r.fence, id: `m${++r.n}` }));
  };
  const at = (e: MouseEvent) => {
    const c = canvas.current!;
    return toDesktop(c.getBoundingClientRect(), c.width, c.height, e.clientX, e.clientY);
  };
  const button = (b: number) => (b === 1 ? 'middle' : b === 2 ? 'right' : 'left');
  const active = state.kind === 'control';
  const handlers = active
    ? {
        onPointerMove: (e: PointerEvent) => {
          const now = performance.now();
          if (now - ref.current.lastMove < 40) return;
          ref.current.lastMove = now;
          send({ type: 'mouse.move', ...at(e) });
        },
        onPointerDown: (e: PointerEvent) => {
          e.preventDefault();
          canvas.current?.focus({ preventScroll: true });
          send({ type: 'mouse.click', at: at(e), button: button(e.button), down: true });
        },
        onPointerUp: (e: PointerEvent) => {
          e.preventDefault();
          send({ type: 'mouse.click', at: at(e), button: button(e.button), up: true });
        },
        onContextMenu: (e: Event) => e.preventDefault(),
        onWheel: (e: WheelEvent) => {
          e.preventDefault();
          const dir = Math.abs(e.deltaX) > Math.abs(e.deltaY) ? (e.deltaX > 0 ? 'right' : 'left') : e.deltaY > 0 ? 'down' : 'up';
          send({ type: 'mouse.scroll', direction: dir, amount: 1, at: at(e) });
        },
        onKeyDown: (e: KeyboardEvent) => {
          const m = keyMessage(e);
          if (!m) return;
          e.preventDefault();
          send(m);
        },
      }
    : {};
  return { state, error, take, release, handlers };
}

