/**
 * The OpenAPI document: served without a credential, valid OpenAPI 3.1 for a third-party validator,
 * and in one-to-one correspondence with the routes the app actually mounts (both directions). Also
 * the /docs reference page (strict CSP, allow-listed assets), every checkable JSON example in docs/,
 * and unknown query parameters named in details.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import t from 'tap';
import { z } from 'zod';
import { ALL_OPS } from '../../control-plane/src/api/v1/index.js';
import * as responses from '../../shared/schemas/responses.js';
import * as machine from '../../shared/schemas/machine.js';
import * as snapshot from '../../shared/schemas/snapshot.js';
import * as template from '../../shared/schemas/template.js';
import { fakeSubstrateWithAgents } from '../helpers/machines-fake-agent.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';

const fake = fakeSubstrateWithAgents();
const rig = await makeMachinesRig({ substrate: fake.substrate });
t.teardown(async () => {
  fake.close();
  await rig.close();
});

const docOf = async () => {
  const r = await rig.call('GET', '/v1/openapi.json');
  t.equal(r.status, 200, 'served without a credential');
  return r.json;
};

t.test('a third-party validator accepts the document as OpenAPI 3.1', async (t) => {
  const doc = await docOf();
  t.equal(doc.openapi, '3.1.0');
  const v = new Validator();
  const res = await v.validate(doc);
  t.same(res.errors, undefined, JSON.stringify(res.errors)?.slice(0, 2000));
  t.equal(res.valid, true);
  t.equal(v.version, '3.1');
});

t.test('route inventory: every mounted /v1 route is in the document and the document names no other', async (t) => {
  const doc = await docOf();
  const documented = new Set<string>();
  for (const [p, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
    for (const m of Object.keys(item)) documented.add(`${m.toUpperCase()} ${p}`);
  }
  const mounted = new Set<string>();
  const mcp = new Set<string>();
  for (const r of rig.app.routes) {
    if (r.method === 'ALL' || !r.path.startsWith('/v1/') || r.path === '/v1/openapi.json') continue;
    // Excluded on purpose: /v1/mcp speaks JSON-RPC (the MCP streamable HTTP transport), not a REST
    // operation OpenAPI can describe; its tools are /v1 operations that are in the document (docs/mcp.md).
    if (r.path === '/v1/mcp') {
      mcp.add(r.method);
      continue;
    }
    mounted.add(`${r.method} ${r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`);
  }
  t.same([...mounted].filter((x) => !documented.has(x)), [], 'no mounted route is missing from the document');
  t.same([...documented].filter((x) => !mounted.has(x)), [], 'the document names no unmounted route');
  t.equal(documented.size, ALL_OPS.length, 'one document operation per op');
  t.same([...mcp].sort(), ['DELETE', 'GET', 'POST'], 'the MCP endpoint is mounted (and deliberately undocumented here)');
  t.notOk(documented.has('POST /v1/mcp'));
  // Pinned literally: the inventory above is only as good as the routes really being there.
  for (const x of ['POST /v1/machines', 'GET /v1/machines/{machine_id}/screenshot', 'PUT /v1/machines/{machine_id}/files/content', 'POST /v1/snapshots', 'DELETE /v1/machines/{machine_id}/ports/{preview_id}']) {
    t.ok(documented.has(x), x);
  }
  // The spec: "There is no read-only pointer query." Neither mounted nor documented (the tool endpoints'
  // cursor_position still reads the pointer from the agent inside the service).
  t.notOk(mounted.has('GET /v1/machines/{machine_id}/mouse/position'), 'no pointer query is mounted');
  t.notOk(documented.has('GET /v1/machines/{machine_id}/mouse/position'), 'no pointer query is documented');
  t.same(Object.keys(doc.paths).filter((p) => p.includes('mouse')).sort(), [
    '/v1/machines/{machine_id}/mouse/click', '/v1/machines/{machine_id}/mouse/drag', '/v1/machines/{machine_id}/mouse/move', '/v1/machines/{machine_id}/mouse/scroll',
  ]);
  const create = doc.paths['/v1/machines'].post;
  t.equal(create.requestBody.content['application/json'].schema.$ref, '#/components/schemas/CreateMachineRequest');
  t.equal(create.responses['201'].content['application/json'].schema.$ref, '#/components/schemas/Machine');
  t.same(create.security, [{ apiKey: [] }, { session: [] }]);
  const list = doc.paths['/v1/machines'].get;
  t.same(list.parameters.map((p: any) => `${p.in}:${p.name}`), ['query:limit', 'query:cursor', 'query:state']);
  t.same(doc.paths['/v1/plans'].get.security, [], 'public routes need no credential');
  // Path parameters carry their shapes: ids their kind's, a secret's name its rule, others plain strings.
  const param = (p: string, m: string, name: string) => doc.paths[p][m].parameters.find((x: any) => x.in === 'path' && x.name === name).schema;
  t.same(param('/v1/machines/{machine_id}', 'get', 'machine_id'), { type: 'string', pattern: '^mch_[0-9a-z]{20,32}$' });
  t.same(param('/v1/machines/{machine_id}/ports/{preview_id}', 'delete', 'preview_id'), { type: 'string', pattern: '^prv_[0-9a-z]{20,32}$' });
  t.same(param('/v1/snapshots/{snapshot_id}', 'delete', 'snapshot_id'), { type: 'string', pattern: '^snp_[0-9a-z]{20,32}$' });
  t.match(param('/v1/machines/{machine_id}/secrets/{name}', 'delete', 'name'), { type: 'string', pattern: String });
  t.same(param('/v1/plans/{plan_id}', 'get', 'plan_id'), { type: 'string' }, 'a plan id is a catalog name, not a generated id');
  t.same(doc.components.schemas.Machine.required.sort(), ['created_at', 'id', 'metadata', 'name', 'region', 'size', 'state', 'state_changed_at', 'template', 'updated_at']);
});

t.test('the /docs reference page: same-origin assets under a strict CSP', async (t) => {
  const page = await rig.call('GET', '/docs');
  t.equal(page.status, 200);
  t.match(page.headers.get('content-security-policy'), /script-src 'self';/);
  t.notMatch(page.text, /<script>(?!<\/script>)/, 'no inline script');
  t.notMatch(page.text, /https?:\/\//, 'nothing loaded from elsewhere');
  const js = await rig.call('GET', '/docs/swagger-ui-bundle.js');
  t.equal(js.status, 200);
  t.match(js.headers.get('content-type'), /javascript/);
  t.match((await rig.call('GET', '/docs/init.js')).text, /\/v1\/openapi\.json/);
  t.equal((await rig.call('GET', '/docs/package.json')).status, 404, 'only allow-listed files');
  t.equal((await rig.call('GET', '/docs/..%2Fpackage.json')).status, 404);
});

t.test('unknown query parameters are named in details on /v1 routes', async (t) => {
  const u = await rig.tenant('developer');
  const r = await rig.call('GET', '/v1/machines?limit=5&colour=red', { key: u.key });
  t.equal(r.status, 400);
  t.same(r.json.error.details, [{ field: 'colour', message: 'unknown query parameter' }]);
  const snap = await rig.call('GET', '/v1/snapshots?limit=2&wiat=true', { key: u.key });
  t.same(snap.json.error.details.map((d: any) => d.field), ['wiat']);
});

/**
 * Convention: a fenced block opened with ```json schema=<Name> in docs/*.md is a real example of the
 * component <Name>; it must parse as JSON and validate against the shared schema.
 */
t.test('every checkable example in docs/ validates against its schema', async (t) => {
  const named: Record<string, z.ZodType> = {};
  for (const m of [responses, machine, snapshot, template]) {
    for (const [k, v] of Object.entries(m)) if (v instanceof z.ZodType) named[k] ??= v;
  }
  const dir = path.join(import.meta.dirname, '../../docs');
  let n = 0;
  for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.md'))) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    for (const m of text.matchAll(/```json schema=(\w+)\n([\s\S]*?)```/g)) {
      n++;
      const schema = named[m[1]!];
      t.ok(schema, `${f}: schema ${m[1]} exists`);
      const parsed = schema?.safeParse(JSON.parse(m[2]!));
      t.ok(parsed?.success, `${f}: example of ${m[1]} ${parsed?.success ? '' : JSON.stringify(parsed?.error.issues)}`);
    }
  }
  t.ok(n >= 5, `found ${n} examples`);
});
