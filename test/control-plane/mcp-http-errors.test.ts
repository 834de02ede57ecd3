/**
 * /v1/mcp's HTTP-level refusals use the spec's error envelope (docs/mcp.md, "Errors"): the transport's own
 * 400/406/415 JSON-RPC bodies become `invalid_request` envelopes with status 400, GET's 405 carries an
 * `unsupported_operation` envelope, while MCP's own JSON-RPC answers (HTTP 200) pass untouched. Through the
 * app in process (the MCP SDK's server transport is the real one); the SDK-client run is mcp.test.ts.
 */
import t from 'tap';
import { assertEnvelope } from '../helpers/control-plane.js';
import { fakeAgentsRig } from '../helpers/machines-fake-agent.js';

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
const BOTH = 'application/json, text/event-stream';

t.test('every refusal outside MCP JSON-RPC answers is the envelope', async (t) => {
  const { rig } = await fakeAgentsRig(t);
  const a = await rig.tenant('developer', ['machines:read']);
  // Straight to the app: the rig's call() always sends content-type application/json, and one case must not.
  const post = async (headers: Record<string, string>, body: string) => {
    const res = await rig.app.request('/v1/mcp', {
      method: 'POST', headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json', ...headers }, body,
    }, { clientIp: '192.0.2.1' });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, json: JSON.parse(text) };
  };

  const get = await rig.call('GET', '/v1/mcp', { key: a.key, headers: { accept: 'text/event-stream' } });
  t.equal(get.status, 405, 'GET keeps the status MCP clients read as "no stream"');
  t.equal(get.headers.get('allow'), 'POST, DELETE');
  t.same(Object.keys(get.json ?? {}).sort(), ['error']);
  t.same(get.json?.error, { code: 'unsupported_operation', message: 'This MCP server offers no server-initiated stream (GET); send requests with POST.', request_id: get.headers.get('x-request-id'), details: [], quota: null });

  const notAcceptable = await post({ accept: 'application/json' }, JSON.stringify(INIT));
  assertEnvelope(t, notAcceptable, 'invalid_request', 400);
  t.equal(notAcceptable.json.error.message, 'Not Acceptable: Client must accept both application/json and text/event-stream', 'was 406 with a JSON-RPC body');
  const media = await post({ accept: BOTH, 'content-type': 'text/plain' }, JSON.stringify(INIT));
  assertEnvelope(t, media, 'invalid_request', 400);
  t.equal(media.json.error.message, 'Unsupported Media Type: Content-Type must be application/json', 'was 415 with a JSON-RPC body');
  const parse = await post({ accept: BOTH }, '{"jsonrpc":');
  assertEnvelope(t, parse, 'invalid_request', 400);
  t.equal(parse.json.error.message, 'Parse error: Invalid JSON', 'was 400 with a JSON-RPC body');
  const uninitialized = await post({ accept: BOTH }, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }));
  assertEnvelope(t, uninitialized, 'invalid_request', 400);
  for (const r of [notAcceptable, media, parse, uninitialized]) t.notOk('jsonrpc' in r.json, 'no JSON-RPC object');

  // MCP's own JSON-RPC answers are untouched: initialize, then a method the server does not have.
  const init = await post({ accept: BOTH }, JSON.stringify(INIT));
  t.equal(init.status, 200);
  t.match(init.json, { jsonrpc: '2.0', id: 1, result: { serverInfo: { name: 'computer' } } });
  const sid = init.headers.get('mcp-session-id')!;
  const unknown = await post({ accept: BOTH, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' }, JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'no/such', params: {} }));
  t.equal(unknown.status, 200);
  t.match(unknown.json, { jsonrpc: '2.0', id: 3, error: { code: -32601 } });
  // In a session too, a transport refusal is the envelope.
  const version = await post({ accept: BOTH, 'mcp-session-id': sid, 'mcp-protocol-version': '1999-01-01' }, JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/list', params: {} }));
  assertEnvelope(t, version, 'invalid_request', 400);
  t.match(version.json.error.message, /^Bad Request: Unsupported protocol version: 1999-01-01/);
});
