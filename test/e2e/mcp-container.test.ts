/**
 * The MCP server at /v1/mcp on the container substrate with the real guest image, driven by the official SDK's
 * Client over StreamableHTTPClientTransport: an agent creates its own machine with create_machine, sees its
 * desktop (a real PNG of the display's size), runs a command, writes and reads a file, types into a real
 * terminal window by the input lease its MCP session takes, and snapshots the machine. Needs root, podman and runc.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import t from 'tap';
import { decodeToRgb } from '../../agent/src/desktop/screen.js';
import { serveOnContainers } from '../helpers/container-served.js';
import { displayUp } from '../helpers/machines-rig.js';

// The first file to need the guest image may wait minutes for its build (CI starts from an empty cache).
t.setTimeout(1_200_000);

type ToolOut = { isError?: boolean; content: Array<{ type: string; text?: string; data?: string; mimeType?: string }> };

t.test('MCP on a real container machine', { timeout: 900_000 }, async (t) => {
  const { rig, served, created } = await serveOnContainers(t, 'mcp-');
  const a = await rig.tenant('pro', ['machines:read', 'machines:write', 'machines:control', 'sessions:write', 'snapshots:read', 'snapshots:write']);
  const mcp = new Client({ name: 'e2e', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${served.port}/v1/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${a.key}` } },
  }));
  t.teardown(() => mcp.close());
  const call = async (name: string, args: Record<string, unknown>) => (await mcp.callTool({ name, arguments: args })) as ToolOut;
  const json = (r: ToolOut) => JSON.parse(r.content.find((x) => x.type === 'text')!.text!);

  const made = await call('create_machine', { name: 'mcp-e2e' });
  t.notOk(made.isError, made.content[0]?.text ?? '');
  const id = json(made).id as string;
  created.push(id);
  t.match(id, /^mch_[a-z0-9]{24}$/);
  await displayUp(rig, a.key, id);

  const shot = await call('screenshot', { machine_id: id });
  t.notOk(shot.isError);
  t.equal(shot.content[0]!.mimeType, 'image/png');
  const frame = await decodeToRgb(Buffer.from(shot.content[0]!.data!, 'base64'));
  const display = json(shot).display as { width: number; height: number };
  t.same([frame.width, frame.height], [display.width, display.height], 'a real PNG of the whole display');

  const ex = await call('exec', { machine_id: id, command: ['sh', '-c', 'uname -s; id -un'] });
  t.match(json(ex), { exit_code: 0, stdout: 'Linux\nagent\n' }, 'exec runs in the guest as the agent user');

  t.notOk((await call('write_file', { machine_id: id, path: '/home/agent/from-mcp.txt', content: 'written over MCP' })).isError);
  t.match(json(await call('read_file', { machine_id: id, path: '/home/agent/from-mcp.txt' })), { content: 'written over MCP' });

  // Typing needs the input lease, which the MCP session takes for itself: into a terminal that writes a file.
  const term = await call('exec', { machine_id: id, command: ['sh', '-c', 'DISPLAY=:0 setsid xterm -geometry 60x10+0+0 -e sh -c "cat > /tmp/typed.txt" >/dev/null 2>&1 & sleep 1; echo started'] });
  t.match(json(term), { stdout: 'started\n' });
  t.notOk((await call('click', { machine_id: id, x: 100, y: 60 })).isError, 'focus the terminal');
  t.notOk((await call('type_text', { machine_id: id, text: 'typed over mcp' })).isError);
  t.notOk((await call('key', { machine_id: id, key: 'Return' })).isError);
  let typed = '';
  for (let i = 0; i < 50 && !typed.includes('\n'); i++) {
    typed = (json(await call('exec', { machine_id: id, command: ['cat', '/tmp/typed.txt'] })) as { stdout: string }).stdout;
    if (!typed.includes('\n')) await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(typed, 'typed over mcp\n', 'the keystrokes reached the guest');

  const snap = await call('snapshot', { machine_id: id, name: 'from-mcp' });
  t.notOk(snap.isError, snap.content[0]?.text ?? '');
  t.match(json(snap), { name: 'from-mcp', machine_id: id, state: /^(pending|ready)$/ });
});
