/** The desktop routes of AGENT_ROUTES: health, display, screenshot, screen stream, pointer, keyboard, clipboard, browser. */
import type { Http2ServerResponse } from 'node:http2';
import { Hono, type MiddlewareHandler } from 'hono';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { AGENT_PROTOCOL_VERSION, AGENT_ROUTES, ClipboardQuery, ScreenStreamQuery, ScreenshotQuery } from '../../../shared/agent-protocol.js';
import { DEFAULT_SCREENSHOT_QUALITY } from '../../../shared/schemas/display.js';
import type { AgentEnv } from '../http/env.js';
import { runScreenStream } from '../desktop/stream.js';
import type { Desktop } from '../desktop/desktop.js';
import { jsonBody, queryOf } from '../http/body.js';
import { REQUEST_ID_HEADER, requestIdOf } from '../http/errors.js';
import { ERRORS } from '../errors.js';

const R = AGENT_ROUTES;

export const SCREEN_STREAM_CONTENT_TYPE = 'application/vnd.computer.screen-stream';

export function desktopRoutes(desktop: Desktop): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();
  // Every route but health: a request that arrives while the display is still coming up waits for it.
  const started: MiddlewareHandler<AgentEnv> = async (_c, next) => {
    await desktop.whenStarted();
    await next();
  };

  // Always 200: this is how the control plane learns whether the desktop came up.
  app.get(R.health.path, (c) => c.json({ ok: true, protocol: AGENT_PROTOCOL_VERSION, desktop: desktop.state }));

  app.get(R['display.get'].path, started, async (c) => c.json(await desktop.getDisplay()));

  app.post(R['display.resize'].path, started, async (c) => {
    const body = await jsonBody(c, R['display.resize'].body);
    return c.json(await desktop.resize(body.width, body.height));
  });

  app.get(R.screenshot.path, started, async (c) => {
    const q = queryOf(c, ScreenshotQuery);
    const { image, display, view } = await desktop.screenshot(q.format, q.quality ?? DEFAULT_SCREENSHOT_QUALITY, q);
    return c.json({ image: image.toString('base64'), format: q.format, display, ...(view ? { view } : {}) });
  });

  app.get(R['screen.stream'].path, started, (c) => {
    const q = queryOf(c, ScreenStreamQuery);
    desktop.requireUp();
    const res = (c.env as { outgoing?: Http2ServerResponse } | undefined)?.outgoing;
    if (!res) throw ERRORS.streamNeedsChannel();
    // The body is written straight to the HTTP/2 stream, so headers set on the Hono context do not apply.
    res.writeHead(200, { 'content-type': SCREEN_STREAM_CONTENT_TYPE, 'cache-control': 'no-store', [REQUEST_ID_HEADER]: requestIdOf(c) });
    runScreenStream(desktop, res, q);
    return RESPONSE_ALREADY_SENT;
  });

  app.get(R['mouse.position'].path, started, async (c) => c.json(await desktop.mousePosition()));
  app.post(R['mouse.move'].path, started, async (c) => c.json(await desktop.mouseMove(await jsonBody(c, R['mouse.move'].body))));
  app.post(R['mouse.click'].path, started, async (c) => c.json(await desktop.mouseClick(await jsonBody(c, R['mouse.click'].body))));
  app.post(R['mouse.drag'].path, started, async (c) => c.json(await desktop.mouseDrag(await jsonBody(c, R['mouse.drag'].body))));
  app.post(R['mouse.scroll'].path, started, async (c) => c.json(await desktop.mouseScroll(await jsonBody(c, R['mouse.scroll'].body))));
  app.post(R['keyboard.key'].path, started, async (c) => c.json(await desktop.key(await jsonBody(c, R['keyboard.key'].body))));
  app.post(R['keyboard.type'].path, started, async (c) => c.json(await desktop.type(await jsonBody(c, R['keyboard.type'].body))));
  app.post(R['keyboard.hotkey'].path, started, async (c) => c.json(await desktop.hotkey(await jsonBody(c, R['keyboard.hotkey'].body))));

  app.get(R['clipboard.get'].path, started, async (c) => {
    const { selection } = queryOf(c, ClipboardQuery);
    return c.json({ selection, text: await desktop.clipboardGet(selection) });
  });

  app.put(R['clipboard.set'].path, started, async (c) => {
    const body = await jsonBody(c, R['clipboard.set'].body);
    await desktop.clipboardSet(body.selection, body.text);
    return c.json({ selection: body.selection, text: body.text });
  });

  app.post(R['browser.open'].path, started, async (c) => {
    const body = await jsonBody(c, R['browser.open'].body);
    const { launched } = await desktop.browserOpen(body.url, body.new_window);
    return c.json({ url: body.url, launched });
  });

  return app;
}
