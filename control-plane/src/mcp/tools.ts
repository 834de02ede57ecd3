/**
 * The MCP server's tools (docs/mcp.md). Each is one /v1 route (input tools: plus the input lease the
 * MCP session holds, input-leases.ts); arguments are the route's own body schema with `machine_id`
 * added, so the SDK validates them and lists them as JSON Schema, and the route validates them again.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ScreenshotFormat, ScreenshotResult } from '../../../shared/schemas/display.js';
import { ExecRequest } from '../../../shared/schemas/exec.js';
import { GuestPath } from '../../../shared/schemas/common.js';
import { FileEncoding, MAX_READ_RANGE, WriteBody } from '../../../shared/schemas/files.js';
import { BrowserOpen, InputResult, KeyName, MouseClick, MouseDrag, MouseScroll, KeyboardType, SettleRequest, Point } from '../../../shared/schemas/input.js';
import { CreateMachineRequest, MachineState } from '../../../shared/schemas/machine.js';
import { MachineIdField, ResourceLabel } from '../../../shared/schemas/snapshot.js';
import type { V1Answer, V1Caller } from './caller.js';
import { V1Failure, type InputLeases } from './input-leases.js';

// Security gate: machine_id is spliced into a /v1 path, so it must be an id and nothing else
// (`../api-keys` would otherwise reach another route with the caller's key).
const machine_id = MachineIdField.describe('The machine, mch_…');

export interface ToolContext {
  /** The /v1 caller of the MCP request this tool call arrived on (its Authorization header). */
  callerOf(extra: { authInfo?: object }): V1Caller;
  leases: InputLeases;
}

function text(value: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value) }] };
}

/** A refused /v1 call: the error envelope as the tool's text, flagged as an error for the model. */
function failure(r: V1Answer): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(r.json ?? { error: { code: 'internal_error', message: `HTTP ${r.status}` } }) }] };
}

const mime = (f: ScreenshotFormat) => `image/${f}`;

/** An input route's answer; a settled screenshot (settle.screenshot) becomes image content instead of base64 in the text. */
function inputResult(json: unknown): CallToolResult {
  const r = InputResult.parse(json);
  const shot = r.settle?.screenshot;
  if (!r.settle || !shot) return text(r);
  const { screenshot: _omitted, ...settle } = r.settle;
  return {
    content: [
      { type: 'text', text: JSON.stringify({ ...r, settle: { ...settle, screenshot: { format: shot.format, view: shot.view } } }) },
      { type: 'image', data: shot.image, mimeType: mime(shot.format) },
    ],
  };
}

const settle = SettleRequest.optional().describe(
  'Wait until the screen has been still for quiet_ms (at most timeout_ms) and report what changed; with settle.screenshot the settled screen comes back as an image.',
);
const at = { x: Point.shape.x.optional(), y: Point.shape.y.optional() };
const pointOf = (a: { x?: number; y?: number }) => (a.x !== undefined && a.y !== undefined ? { x: a.x, y: a.y } : undefined);

export function registerTools(server: McpServer, ctx: ToolContext): void {
  /** A plain /v1 call whose JSON answer is the tool's text. */
  const plain = async (extra: { authInfo?: object }, method: 'GET' | 'POST' | 'PUT', path: string, ok: number[], body?: unknown) => {
    const r = await ctx.callerOf(extra).call(method, path, { body });
    return ok.includes(r.status) ? text(r.json) : failure(r);
  };

  /** An input route: as the MCP session's lease holder (taken or renewed first). */
  const input = async (extra: { authInfo?: object }, machineId: string, route: string, body: unknown, answer = inputResult): Promise<CallToolResult> => {
    const caller = ctx.callerOf(extra);
    let headers: Record<string, string>;
    try {
      headers = await ctx.leases.headers(caller, machineId);
    } catch (e) {
      if (e instanceof V1Failure) return failure(e.answer);
      throw e;
    }
    const r = await caller.call('POST', `/v1/machines/${machineId}/${route}`, { body, headers });
    if (r.status === 409) ctx.leases.lost(machineId);
    return r.status === 200 ? answer(r.json) : failure(r);
  };

  server.registerTool('list_machines', {
    description: 'List the machines of the organization the API key belongs to.',
    inputSchema: { state: MachineState.optional(), limit: z.number().int().min(1).max(200).optional(), cursor: z.string().min(1).max(512).optional() },
    annotations: { readOnlyHint: true },
  }, async (a, extra) => {
    const q = new URLSearchParams();
    if (a.state) q.set('state', a.state);
    if (a.limit) q.set('limit', String(a.limit));
    if (a.cursor) q.set('cursor', a.cursor);
    return plain(extra, 'GET', `/v1/machines${q.size ? `?${q}` : ''}`, [200]);
  });

  server.registerTool('create_machine', {
    description: 'Create (and by default start) a machine: a Linux desktop with a shell and a browser.',
    inputSchema: CreateMachineRequest.shape,
  }, async (a, extra) => plain(extra, 'POST', '/v1/machines', [200, 201], a));

  server.registerTool('screenshot', {
    description:
      'Capture the screen. Optionally scaled server-side (width/height, or max_side for the longest side) and/or cropped to a region (zoom); ' +
      'the text part gives the display size and, when scaled or cropped, the view (region and scale) to map image pixels back to display pixels.',
    inputSchema: {
      machine_id,
      format: ScreenshotFormat.default('png'),
      quality: z.number().int().min(1).max(100).optional(),
      width: z.number().int().min(1).max(16384).optional(),
      height: z.number().int().min(1).max(16384).optional(),
      max_side: z.number().int().min(16).max(16384).optional(),
      region: z.strictObject({ x: z.number().int().min(0), y: z.number().int().min(0), width: z.number().int().min(1), height: z.number().int().min(1) }).optional(),
    },
    annotations: { readOnlyHint: true },
  }, async (a, extra) => {
    const q = new URLSearchParams({ format: a.format });
    for (const k of ['quality', 'width', 'height', 'max_side'] as const) if (a[k] !== undefined) q.set(k, String(a[k]));
    if (a.region) q.set('region', `${a.region.x},${a.region.y},${a.region.width},${a.region.height}`);
    const r = await ctx.callerOf(extra).call('GET', `/v1/machines/${a.machine_id}/screenshot?${q}`);
    if (r.status !== 200) return failure(r);
    const shot = ScreenshotResult.parse(r.json);
    return {
      content: [
        { type: 'image', data: shot.image, mimeType: mime(shot.format) },
        { type: 'text', text: JSON.stringify({ format: shot.format, display: shot.display, view: shot.view }) },
      ],
    };
  });

  server.registerTool('click', {
    description: 'Click at (x, y) in display pixels (the pointer position when omitted). count 2 is a double click; modifiers are held during the click.',
    inputSchema: { machine_id, ...at, button: MouseClick.shape.button, count: MouseClick.shape.count, modifiers: MouseClick.shape.modifiers, settle },
  }, async ({ machine_id: id, x, y, ...rest }, extra) => input(extra, id, 'mouse/click', { ...rest, at: pointOf({ x, y }) }));

  server.registerTool('type_text', {
    description: 'Type text (any Unicode) with the keyboard into whatever has focus.',
    inputSchema: { machine_id, text: KeyboardType.shape.text, delay_ms: KeyboardType.shape.delay_ms, settle },
  }, async ({ machine_id: id, ...body }, extra) => input(extra, id, 'keyboard/type', body));

  server.registerTool('key', {
    description: 'Press a key (an X keysym name: Return, Tab, Escape, BackSpace, F5, a) or a combination joined by "+" (ctrl+c, ctrl+shift+t, alt+F4).',
    inputSchema: {
      machine_id,
      key: z.string().min(1).max(8 * 33).regex(/^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$/, 'key names joined by +'),
      repeat: z.number().int().min(1).max(100).default(1),
      settle,
    },
  }, async ({ machine_id: id, key, repeat, settle: s }, extra) => {
    const keys = key.split('+');
    if (keys.length === 1) return input(extra, id, 'keyboard/key', { key, repeat, settle: s });
    const parsed = z.array(KeyName).max(8).safeParse(keys);
    if (!parsed.success) return { isError: true, content: [{ type: 'text', text: 'A combination has at most 8 keys of at most 32 characters each.' }] };
    let last: CallToolResult = text({});
    for (let i = 0; i < repeat; i++) {
      last = await input(extra, id, 'keyboard/hotkey', { keys: parsed.data, settle: i === repeat - 1 ? s : undefined });
      if (last.isError) break;
    }
    return last;
  });

  server.registerTool('scroll', {
    description: 'Scroll the mouse wheel at (x, y) (the pointer position when omitted) by amount clicks.',
    inputSchema: { machine_id, direction: MouseScroll.shape.direction, amount: MouseScroll.shape.amount, ...at, modifiers: MouseScroll.shape.modifiers, settle },
  }, async ({ machine_id: id, x, y, ...rest }, extra) => input(extra, id, 'mouse/scroll', { ...rest, at: pointOf({ x, y }) }));

  server.registerTool('drag', {
    description: 'Press a button at from (the pointer position when omitted), move along a straight line to to, release.',
    inputSchema: { machine_id, from: MouseDrag.shape.from, to: MouseDrag.shape.to, steps: MouseDrag.shape.steps, button: MouseDrag.shape.button, modifiers: MouseDrag.shape.modifiers, settle },
  }, async ({ machine_id: id, ...body }, extra) => input(extra, id, 'mouse/drag', body));

  server.registerTool('exec', {
    description: 'Run a command (argv, no shell unless you call one: ["bash", "-lc", "…"]) and answer its exit code, stdout and stderr.',
    inputSchema: { machine_id, ...ExecRequest.shape },
  }, async ({ machine_id: id, ...body }, extra) => plain(extra, 'POST', `/v1/machines/${id}/exec`, [200], body));

  server.registerTool('read_file', {
    description: `Read a file (up to ${MAX_READ_RANGE} bytes per call from offset); encoding base64 for binary files.`,
    inputSchema: {
      machine_id,
      path: GuestPath,
      offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
      length: z.number().int().min(1).max(MAX_READ_RANGE).default(MAX_READ_RANGE),
      encoding: FileEncoding.default('utf8'),
      user: WriteBody.shape.user,
    },
    annotations: { readOnlyHint: true },
  }, async ({ machine_id: id, path, offset, length, encoding, user }, extra) => {
    const q = new URLSearchParams({ path, offset: String(offset), length: String(length), encoding, user });
    return plain(extra, 'GET', `/v1/machines/${id}/files/content?${q}`, [200]);
  });

  server.registerTool('write_file', {
    description: 'Write (or append to) a file, creating missing parent directories by default.',
    inputSchema: { machine_id, path: GuestPath, ...WriteBody.shape },
  }, async ({ machine_id: id, path, ...body }, extra) => plain(extra, 'PUT', `/v1/machines/${id}/files/content?${new URLSearchParams({ path })}`, [200, 201], body));

  server.registerTool('open_url', {
    description: 'Open a URL in the machine\'s browser (started if needed), in a new window when new_window is true.',
    inputSchema: { machine_id, ...BrowserOpen.shape },
  }, async ({ machine_id: id, ...body }, extra) => input(extra, id, 'browser/open', body, text));

  server.registerTool('snapshot', {
    description: 'Snapshot the machine\'s disk (live, crash-consistent) and wait until it is ready or failed.',
    inputSchema: { machine_id, name: ResourceLabel.optional() },
  }, async (a, extra) => plain(extra, 'POST', '/v1/snapshots?wait=true', [201, 202], a));
}
