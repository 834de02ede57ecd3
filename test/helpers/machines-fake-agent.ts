/**
 * A FakeSubstrate whose channels are served by the real agent app (real HTTP/2 server, auth, envelope,
 * real exec and TCP stream routes; a TCP stream reaches this host's loopback) with a small in-memory desktop mount standing in for Xvfb. For unit tests of the
 * control plane's proxy, lease and lifecycle logic.
 */
import { Hono } from 'hono';
import type { Duplex } from 'node:stream';
import { createAgentApp, type AgentEnv } from '../../agent/src/app.js';
import { createAgentServer } from '../../agent/src/channel/server.js';
import { jsonBody } from '../../agent/src/http/body.js';
import { execRoutes } from '../../agent/src/routes/exec.js';
import { secretsRoutes } from '../../agent/src/routes/secrets.js';
import type { SecretStore } from '../../agent/src/secrets/store.js';
import { tcpRoutes } from '../../agent/src/routes/tcp.js';
import { AGENT_ROUTES } from '../../shared/agent-protocol.js';
import { AppError } from '../../shared/errors.js';
import { makeMachinesRig } from './machines-rig.js';
import { FakeSubstrate, type FakeSubstrateOptions } from '../../control-plane/src/substrate/fake.js';
import { Enrollment } from '../../agent/src/enrollment.js';

export interface FakeDesktopState {
  width: number;
  height: number;
  up: boolean;
  pointer: { x: number; y: number } | null;
  typed: string[];
}

function desktopMount(st: FakeDesktopState): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();
  const R = AGENT_ROUTES;
  const display = () => ({ width: st.width, height: st.height, up: st.up, resizable: true });
  const inside = (p: { x: number; y: number }, field: string) => {
    if (p.x >= st.width || p.y >= st.height) throw new AppError('invalid_request', 'outside the display', { details: [{ field, message: 'outside the display' }] });
  };
  app.get(R['display.get'].path, (c) => c.json(display()));
  app.get(R.screenshot.path, (c) => {
    if (!st.up) throw new AppError('compute_unavailable', 'desktop not up');
    return c.json({ image: Buffer.from('frame').toString('base64'), format: 'png', display: display() });
  });
  app.post(R['mouse.move'].path, async (c) => {
    const b = await jsonBody(c, R['mouse.move'].body);
    inside(b, 'x');
    st.pointer = { x: b.x, y: b.y };
    return c.json({ display: display(), pointer: st.pointer });
  });
  app.post(R['mouse.click'].path, async (c) => {
    const b = await jsonBody(c, R['mouse.click'].body);
    if (b.at) inside(b.at, 'at');
    if (b.at) st.pointer = { ...b.at };
    return c.json({ display: display(), pointer: st.pointer });
  });
  app.post(R['keyboard.type'].path, async (c) => {
    const b = await jsonBody(c, R['keyboard.type'].body);
    st.typed.push(b.text);
    return c.json({ display: display(), pointer: st.pointer });
  });
  return app;
}

/**
 * The agent's real secrets routes over an in-memory stand-in for its tmpfs store (the real store, on a
 * real tmpfs, is covered by test/agent/secrets.test.ts and the container end to end).
 */
function memorySecretStore(delivered: Map<string, string>): SecretStore {
  const answer = () => ({ names: [...delivered.keys()].sort(), delivered_at: new Date().toISOString() });
  return {
    file: '/run/computer/secrets.env',
    async replace(secrets) {
      delivered.clear();
      for (const [k, v] of Object.entries(secrets)) delivered.set(k, v);
      return answer();
    },
    async remove(name) {
      delivered.delete(name);
      return answer();
    },
    names: async () => [...delivered.keys()].sort(),
  };
}

/**
 * A FakeSubstrate serving each machine's channel with an agent the control plane enrolls with that machine's key.
 * `replaced` names machines whose guest replaced the agent: their channel goes to that handler instead.
 * `mountsFirst` adds route groups ahead of the stock ones (a hostile agent's routes).
 */
export function fakeSubstrateWithAgents(
  opts: FakeSubstrateOptions & { replaced?: Map<string, (guestEnd: Duplex) => void>; mountsFirst?: () => Hono<AgentEnv>[]; desktopsStartDown?: boolean } = {},
) {
  const desktops = new Map<string, FakeDesktopState>();
  const desktopOf = (id: string) => {
    let d = desktops.get(id);
    if (!d) desktops.set(id, (d = { width: 1280, height: 800, up: !opts.desktopsStartDown, pointer: null, typed: [] }));
    return d;
  };
  const secrets = new Map<string, Map<string, string>>();
  const secretsOf = (id: string) => {
    let m = secrets.get(id);
    if (!m) secrets.set(id, (m = new Map()));
    return m;
  };
  const servers = new Map<string, ReturnType<typeof createAgentServer>>();
  // eslint-disable-next-line prefer-const
  let sub: FakeSubstrate;
  const handler = (id: string, guestEnd: Duplex) => {
    const other = opts.replaced?.get(id);
    if (other) return other(guestEnd);
    let server = servers.get(id);
    if (!server) {
      const app = createAgentApp({ enrollment: new Enrollment({ kind: 'channel' }), log: () => {}, mounts: [...(opts.mountsFirst?.() ?? []), desktopMount(desktopOf(id)), execRoutes(), secretsRoutes(memorySecretStore(secretsOf(id))), tcpRoutes()] });
      server = createAgentServer(app, () => {});
      servers.set(id, server);
    }
    server.emit('connection', guestEnd);
  };
  sub = new FakeSubstrate({ ...opts, channelHandler: handler });
  return {
    substrate: sub,
    desktopOf,
    /** What each machine's agent holds as delivered secrets (name → value). */
    secretsOf,
    close() {
      for (const s of servers.values()) s.close();
    },
  };
}

/** The usual /v1 rig on fake machines with in-process agents, both torn down with the test. */
export async function fakeAgentsRig(t: { teardown(fn: () => unknown): void }) {
  const fake = fakeSubstrateWithAgents();
  const rig = await makeMachinesRig({ substrate: fake.substrate });
  t.teardown(async () => {
    fake.close();
    await rig.close();
  });
  return { fake, rig, sub: fake.substrate };
}
