/** Terminal tab: a pty opened for this page, xterm.js over the gateway's terminal channel, resized to fit. */
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { TerminalServerMessage } from '../../../../shared/schemas/gateway.js';
import { api, errorText, openChannel } from '../api.js';
import type { Machine } from '../types.js';

export function TerminalTab({ machine }: { machine: Machine }) {
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState('connecting');
  useEffect(() => {
    const term = new Terminal({ cursorBlink: true, fontSize: 14, convertEol: false, scrollback: 5000 });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(host.current!);
    fit.fit();
    let ws: WebSocket | null = null;
    let termId: string | null = null;
    let disposed = false;
    const enc = new TextEncoder();
    (async () => {
      try {
        const t = await api<{ id: string }>('POST', `/v1/machines/${machine.id}/terminals`, { cols: term.cols, rows: term.rows });
        termId = t.id;
        if (disposed) return;
        ws = openChannel(`/v1/machines/${machine.id}/terminals/${t.id}/attach`);
        if (!ws) return;
        ws.binaryType = 'arraybuffer';
        ws.onopen = () => {
          setStatus('connected');
          term.focus();
        };
        ws.onmessage = (ev) => {
          if (typeof ev.data === 'string') {
            const m = JSON.parse(ev.data) as TerminalServerMessage;
            if (m.type === 'exit') setStatus(`exited (${m.exit_code ?? 'signal'})`);
            return;
          }
          term.write(new Uint8Array(ev.data as ArrayBuffer));
        };
        ws.onclose = (ev) => {
          if (!disposed) setStatus(ev.code === 1000 ? 'exited' : `disconnected (${ev.code})`);
        };
      } catch (e) {
        setStatus(errorText(e));
      }
    })();
    const input = term.onData((d) => {
      if (ws?.readyState === WebSocket.OPEN) ws.send(enc.encode(d));
    });
    const resized = term.onResize(({ cols, rows }) => {
      if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols, rows }));
    });
    const ro = new ResizeObserver(() => fit.fit());
    ro.observe(host.current!);
    return () => {
      disposed = true;
      ro.disconnect();
      input.dispose();
      resized.dispose();
      ws?.close();
      // The pty belongs to this page: it goes when the tab closes.
      if (termId) void api('DELETE', `/v1/machines/${machine.id}/terminals/${termId}`).catch(() => {});
      term.dispose();
    };
  }, [machine.id]);
  return (
    <div class="terminal-tab">
      <p class="conn" role="status" aria-label="Terminal connection">{status}</p>
      <div class="terminal" ref={host} aria-label="Terminal" role="region" />
    </div>
  );
}
