/**
 * Gateway benchmark: a real agent process on a real Xvfb at 1280x800, reached by the gateway's own
 * agent-stream dialer and the control plane's AgentPool over the unix socket channel, and real ws
 * clients on loopback. Credentials and the lease are stubbed (an always-valid principal and fence): one
 * SQLite read per message in the real services, negligible next to what is measured.
 *
 *  - input → applied on screen: a `keyboard.type` of one character into a focused xterm, from the ws
 *    send until the screen channel delivers the next frame (the agent sends frames only on change);
 *  - input → ack: the input message's round trip;
 *  - screen frames/s at 1280x800 with the whole screen changing continuously (fps cap 30);
 *  - the screen channel's encodings side by side in the same run (`frames` jpeg, `tiles` jpeg, `tiles`
 *    webp), one viewer at a time at fps 30, q60, on the same activity: an idle desktop, a terminal printing
 *    ten short lines a second, and a long web page in Chromium scrolled by the wheel (one click every 100 ms,
 *    smooth scrolling on): bytes/s and frames/s (binary messages; for tiles, key frames + deltas) per
 *    viewer, measured 5 s each, and for tiles the rows of new content the scroll copies exposed per second,
 *    the bytes per exposed row and the share of key frames: how far the page moved varies by run with how
 *    many animation steps the host renders, and the bytes follow it, so bytes per exposed row (and the
 *    Mbit/s it makes at 1000 rows/s) is the figure that compares across runs.
 *  - the host's load average (1 min) at the start of each part: the machine is shared, and every figure
 *    here moves with it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { WebSocket } from 'ws';
import { AgentPool } from '../../control-plane/src/agent-client/pool.js';
import { dropEnrollmentSecret } from '../../control-plane/src/substrate/substrate.js';
import type { Principal } from '../../control-plane/src/context.js';
import { AgentStreamDialer } from '../../control-plane/src/agent-client/streams.js';
import type { GatewayDeps } from '../../control-plane/src/gateway/deps.js';
import { attachGateway } from '../../control-plane/src/gateway/gateway.js';
import { EgressCounter } from '../../control-plane/src/gateway/send.js';
import { decodeScreenTilesMessage } from '../../shared/screen-tiles.js';
import { startXvfb } from '../../test/helpers/xvfb.js';
import { line, percentile } from './stats.js';

const MID = 'mch_' + 'b'.repeat(24);
const KEY = 'sk_bench_gateway';

function summary(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  return `p50 ${percentile(s, 50).toFixed(1)} ms  p90 ${percentile(s, 90).toFixed(1)} ms  max ${s[s.length - 1]!.toFixed(1)} ms  (n=${s.length})`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function openWs(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${KEY}` }, perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_q, res) => reject(new Error(`refused ${res.statusCode}`)));
  });
}

export interface GatewayBenchOptions {
  /** Only the screen channel's encodings side by side and input → visible (`BENCH=screen`). */
  screenOnly?: boolean;
  /** Run the agent with `--cpu-prof` into this directory (`BENCH_AGENT_PROFILE=dir`): its per-message cost. */
  agentProfileDir?: string;
}

export async function benchGateway(opts: GatewayBenchOptions = {}): Promise<void> {
  console.log(`\n== gateway${opts.screenOnly ? ', screen part' : ''} (ws on loopback → real agent process over a unix socket, 1280x800) ==`);
  const load = () => `load average ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`;
  const xvfb = await startXvfb({ width: 1280, height: 800 });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-gw-'));
  const token = 'bench-gw-token-' + 'g'.repeat(32);
  const sock = path.join(dir, 'agent.sock');
  const procs: ChildProcess[] = [];
  const agentMain = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../agent/src/main.js');
  const prof = opts.agentProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.agentProfileDir}`] : [];
  procs.push(spawn(process.execPath, [...prof, agentMain, '--socket', sock, '--enroll-file', path.join(dir, 'enroll'), '--display', xvfb.display,
    '--fbdir', xvfb.fbdir, '--secrets-dir', path.join(dir, 'secrets'), '--profile-script', path.join(dir, 'profile.sh'), '--quiet'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  }));
  const openChannel = () =>
    new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(sock);
      s.once('connect', () => resolve(s));
      s.once('error', reject);
    });
  const pool = new AgentPool({ openChannel, issueEnrollment: async () => dropEnrollmentSecret(dir) });
  const dialer = new AgentStreamDialer({ session: (id, key) => pool.session(id, key), drop: (id) => pool.drop(id) });
  const principal: Principal = {
    kind: 'api_key', user_id: 'usr_bench', auth_session_id: null, api_key_id: 'key_bench', org_id: 'org_bench', role: 'owner',
    scopes: null, permissions: new Set(['machines:control']) as Principal['permissions'], via_cookie: false,
  };
  const egress = new EgressCounter();
  const deps: GatewayDeps = {
    authenticate: async (req) => (req.headers.authorization === `Bearer ${KEY}` ? principal : null),
    isRecognisedOrigin: () => false,
    getMachine: async (_o, id) => ({ id, state: 'running' }),
    openAgentStream: (_o, id, req) => dialer.open(id, token, req),
    callAgent: async (_o, id, req) => {
      const r = await pool.request(id, token, { method: req.method, path: req.path, body: req.body });
      return { status: r.status, body: r.body };
    },
    leases: { checkSession: async () => {}, checkFence: async () => ({ ok: true }), watch: () => () => {} },
    events: { validateCursor: () => {}, subscribe: () => () => {} },
    egress,
    secretForTyping: async () => {
      throw new Error('no secrets in this benchmark');
    },
  };
  const server = http.createServer((_q, res) => res.writeHead(404).end());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const gateway = attachGateway(server, deps);
  const base = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/v1/machines/${MID}`;
  try {
    for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await sleep(50);
    for (let i = 0; i < 100; i++) {
      const h = await pool.request(MID, token, { method: 'GET', path: '/health' }).catch(() => null);
      if (h?.status === 200 && JSON.parse(h.body.toString()).desktop.up) break;
      await sleep(100);
    }
    const env = { ...process.env, DISPLAY: xvfb.display, LC_ALL: 'C.UTF-8' };
    procs.push(spawn('xsetroot', ['-solid', '#336699'], { env, stdio: 'ignore' }));
    procs.push(spawn('xterm', ['-geometry', '100x30+0+0', '-e', 'sh', '-c', 'cat > /dev/null'], { env, stdio: 'ignore' }));
    await sleep(1500);

    const input = await openWs(`${base}/input?session_id=ses_bench`);
    const acks: Array<() => void> = [];
    input.on('message', (d) => {
      const m = JSON.parse(d.toString());
      if (m.type === 'ack' || m.type === 'error') acks.shift()?.();
    });
    const send = (m: object) =>
      new Promise<void>((resolve) => {
        acks.push(resolve);
        input.send(JSON.stringify({ ...m, fence: 1 }));
      });
    await send({ type: 'mouse.move', x: 200, y: 200 });
    await sleep(500);

    const ackMs: number[] = [];
    for (let i = 0; i < (opts.screenOnly ? 0 : 200); i++) {
      const t0 = performance.now();
      await send({ type: 'mouse.move', x: 100 + (i % 300), y: 100 + (i % 200) });
      ackMs.push(performance.now() - t0);
    }
    if (ackMs.length) line('input message → ack (mouse.move)', summary(ackMs));

    line('host', `${load()} (input → applied)`);
    const toScreen = { frames: [] as number[], tiles: [] as number[] };
    for (let i = 0; i < 80; i++) {
      // Even keystrokes timed on a frames viewer, odd ones on a tiles viewer (same xterm, same run), each the
      // only screen stream running while it is timed: with a frames viewer kept open beside the tiles one (as
      // before 2026-11-26), its whole-screen encode of the same keystroke competed with the tiles stream.
      const encoding = i % 2 === 1 ? 'tiles' : 'frames';
      const tv = await openWs(`${base}/screen?format=jpeg&quality=60&fps=30&encoding=${encoding}`);
      let received = 0;
      let next: (() => void) | null = null;
      tv.on('message', (_d, isBinary) => {
        if (!isBinary) return;
        received++;
        next?.();
      });
      await sleep(300);
      // Quiet first: no frame for 150 ms, so the next frame is the one the keystroke caused.
      for (;;) {
        const n = received;
        await sleep(150);
        if (received === n) break;
      }
      const t0 = performance.now();
      const got = new Promise<void>((resolve) => (next = resolve));
      void send({ type: 'keyboard.type', text: String.fromCharCode(97 + (i % 26)) });
      await got;
      toScreen[encoding].push(performance.now() - t0);
      tv.close();
    }
    line('input → applied on screen (type 1 char, fps 30)', summary(toScreen.frames));
    line('input → applied on screen, tiles encoding', summary(toScreen.tiles));

    const viewer = await openWs(`${base}/screen?format=jpeg&quality=60&fps=30`);
    let frames = 0;
    let frameBytes = 0;
    viewer.on('message', (d, isBinary) => {
      if (!isBinary) return;
      frames++;
      frameBytes += (d as Buffer).length;
    });
    // Whole-screen change: random text scrolling in a full-screen xterm.
    if (!opts.screenOnly) await wholeScreen();
    viewer.close();
    for (const p of procs.splice(2)) p.kill('SIGTERM');
    await sleep(1000);
    await encodings();
    input.close();

    async function wholeScreen(): Promise<void> {
      procs.push(spawn('xterm', ['-geometry', '210x62+0+0', '-e', 'sh', '-c', 'while :; do head -c 20000 /dev/urandom | base64; sleep 0.01; done'], { env, stdio: 'ignore' }));
      await sleep(1500);
      const f0 = frames;
      const b0 = frameBytes;
      const t0 = performance.now();
      await sleep(5000);
      const secs = (performance.now() - t0) / 1000;
      const fps = (frames - f0) / secs;
      line('screen frames/s at 1280x800 (jpeg q60, cap 30)', `${fps.toFixed(1)} frames/s, ${((frameBytes - b0) / secs / 1024 / 1024).toFixed(2)} MB/s, ${((frameBytes - b0) / Math.max(1, frames - f0) / 1024).toFixed(0)} KB/frame`);
      line('egress counted for the machine', `${(egress.peek(MID) / 1024 / 1024).toFixed(1)} MB`);
    }

    async function encodings(): Promise<void> {
      type Viewer = { encoding: 'frames' | 'tiles'; format: 'jpeg' | 'webp' };
      const viewers: Viewer[] = [{ encoding: 'frames', format: 'jpeg' }, { encoding: 'tiles', format: 'jpeg' }, { encoding: 'tiles', format: 'webp' }];
      /** One viewer for 5 s after a 1.5 s settle (its joining key frame not counted). */
      const measure = async ({ encoding, format }: Viewer) => {
        const ws = await openWs(`${base}/screen?format=${format}&quality=60&fps=30&encoding=${encoding}`);
        let n = 0;
        let bytes = 0;
        let copies = 0;
        /** Rows of new content the scroll copies exposed (the viewer had to be sent them). */
        let exposed = 0;
        let keyBytes = 0;
        ws.on('message', (d, isBinary) => {
          if (!isBinary) return;
          n++;
          bytes += (d as Buffer).length;
          const h = encoding === 'tiles' ? decodeScreenTilesMessage(d as Buffer).header : null;
          if (h?.type === 'frame') keyBytes += (d as Buffer).length;
          if (h?.type === 'tiles' && h.copy) {
            copies++;
            exposed += Math.abs(h.copy.sy - h.copy.y);
          }
        });
        await sleep(1500);
        const [n0, b0, c0, e0, k0, t0] = [n, bytes, copies, exposed, keyBytes, performance.now()];
        await sleep(5000);
        const secs = (performance.now() - t0) / 1000;
        ws.close();
        return { bps: (bytes - b0) / secs, fps: (n - n0) / secs, copies: copies - c0, rows: exposed - e0, keyShare: (keyBytes - k0) / Math.max(1, bytes - b0), secs };
      };
      const fmt = (r: Awaited<ReturnType<typeof measure>>) => {
        const rate = `${r.bps >= 100 * 1024 ? `${((r.bps * 8) / 1e6).toFixed(2)} Mbit/s` : `${(r.bps / 1024).toFixed(2)} KB/s`} ${r.fps.toFixed(1)} frames/s`;
        if (!r.copies) return rate;
        const perRow = (r.bps * r.secs) / Math.max(1, r.rows);
        return `${rate} (${r.copies} scroll copies, ${(r.rows / r.secs).toFixed(0)} rows/s exposed, ${perRow.toFixed(0)} B/exposed row = ` +
          `${((perRow * 1000 * 8) / 1e6).toFixed(2)} Mbit/s at 1000 rows/s, key frames ${(r.keyShare * 100).toFixed(0)}% of bytes)`;
      };
      const compare = async (what: string, target: string) => {
        const out: string[] = [];
        const at = load();
        for (const v of viewers) out.push(fmt(await measure(v)));
        line(`screen ${what}: frames | tiles jpeg | tiles webp`, `${out.join('  |  ')}   (target for tiles: ${target}; ${at})`);
      };
      await compare('idle desktop', '≤ 1 KB/s');
      const printer = spawn('xterm', ['-geometry', '100x30+0+0', '-e', 'sh', '-c', 'i=0; while :; do i=$((i+1)); echo "short line $i"; sleep 0.1; done'], { env, stdio: 'ignore' });
      procs.push(printer);
      await sleep(1500);
      await compare('terminal, 10 short lines/s', '≤ 30 KB/s');
      printer.kill('SIGTERM');
      // A long page: headings, paragraphs and coloured boxes, in Chromium (app window, 1280x800), scrolled the way a
      // person does: one wheel click every 100 ms with Chromium's smooth scrolling on (each click is animated
      // over several frames, so the screen changes every tick, in small steps).
      const page = path.join(dir, 'long.html');
      const para = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. '.repeat(3);
      fs.writeFileSync(page, `<!doctype html><body style="font:16px sans-serif;margin:40px">${Array.from({ length: 400 }, (_x, i) =>
        `<h2>Section ${i}</h2><p>${para}</p>${i % 5 === 0 ? `<div style="height:80px;background:hsl(${(i * 37) % 360},60%,70%)"></div>` : ''}`).join('')}</body>`);
      procs.push(spawn('chromium', ['--no-sandbox', '--disable-gpu', '--no-first-run', '--enable-smooth-scrolling', `--user-data-dir=${path.join(dir, 'chromium')}`,
        '--window-position=0,0', '--window-size=1280,800', `--app=file://${page}`], { env, stdio: 'ignore' }));
      await sleep(5000);
      let scrolling = true;
      const scroller = (async () => {
        for (let i = 0; scrolling; i++) {
          await send({ type: 'mouse.scroll', direction: Math.floor(i / 200) % 2 ? 'up' : 'down', amount: 1, at: { x: 640, y: 400 } });
          await sleep(100);
        }
      })();
      await compare('scrolling a long web page', '≤ 3 Mbit/s at ≥ 20 frames/s');
      scrolling = false;
      await scroller;
    }
  } finally {
    await gateway.close();
    await new Promise<void>((r) => server.close(() => r()));
    dialer.close();
    await pool.close();
    for (const p of procs) p.kill('SIGTERM');
    await sleep(200);
    await xvfb.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
