/**
 * The OpenAPI document generates a working client with third-party tools: openapi-typescript turns GET
 * /v1/openapi.json (fetched from a real listener) into types, tsc type-checks a small openapi-fetch program
 * against them, and that program runs against the same server: signup, an API key, list machines, an
 * error envelope.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import t from 'tap';
import ts from 'typescript';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { PUBLIC_ORIGIN } from '../helpers/control-plane.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';
import { serveWithGateway } from '../helpers/serve-gateway.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const PROGRAM = `
import createClient from 'openapi-fetch';
import type { paths } from './schema.js';

export async function run(baseUrl: string, origin: string) {
  const api = createClient<paths>({ baseUrl });
  const su = await api.POST('/v1/auth/signup', { body: { email: 'gen@example.com', password: 'correct horse battery', name: 'g' } });
  if (!su.data) throw new Error('signup failed');
  const cookie = (su.response.headers.get('set-cookie') ?? '').split(';')[0]!;
  // A new organization creates nothing (API keys included) until it subscribes: start the trial first.
  const co = await api.POST('/v1/billing/checkout', { body: { plan_id: 'developer', success_url: origin + '/ok' }, headers: { cookie, origin } });
  if (!co.data) throw new Error('checkout failed');
  await fetch(baseUrl + new URL(co.data.url).pathname, { redirect: 'manual' });
  const key = await api.POST('/v1/api-keys', { body: { name: 'gen', scopes: ['machines:read'] }, headers: { cookie, origin } });
  if (!key.data) throw new Error('key failed');
  const authed = createClient<paths>({ baseUrl, headers: { authorization: 'Bearer ' + key.data.secret } });
  const list = await authed.GET('/v1/machines', { params: { query: { limit: '5' } } });
  const missing = await authed.GET('/v1/machines/{machine_id}', { params: { path: { machine_id: 'mch_000000000000000000000000' } } });
  return {
    org: su.data.organization_id,
    machines: list.data?.data.length,
    next: list.data?.next_cursor,
    status: missing.response.status,
    code: missing.error?.error.code,
  };
}
`;

t.test('a client generated from the OpenAPI document', { timeout: 120_000 }, async (t) => {
  const rig = await makeMachinesRig({ substrate: new FakeSubstrate() });
  const served = await serveWithGateway(rig);
  t.teardown(async () => {
    await served.close();
    await rig.close();
  });
  const baseUrl = `http://127.0.0.1:${served.port}`;
  const types = astToString(await openapiTS(new URL(`${baseUrl}/v1/openapi.json`)));

  // Inside the repository, so openapi-fetch resolves through its node_modules.
  const dir = fs.mkdtempSync(path.join(REPO, '.openapi-client-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'schema.d.ts'), types);
  fs.writeFileSync(path.join(dir, 'client.ts'), PROGRAM);

  const program = ts.createProgram([path.join(dir, 'client.ts')], {
    strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, skipLibCheck: true,
  });
  const diags = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  t.same(diags, [], 'the program type-checks against the generated types');

  // A misuse the generated types must reject: an unknown path.
  fs.writeFileSync(path.join(dir, 'bad.ts'), `import createClient from 'openapi-fetch';\nimport type { paths } from './schema.js';\nvoid createClient<paths>({}).GET('/v1/no-such-route');\n`);
  const bad = ts.getPreEmitDiagnostics(ts.createProgram([path.join(dir, 'bad.ts')], { strict: true, noEmit: true, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, skipLibCheck: true }));
  t.ok(bad.length > 0, 'an unknown path does not type-check');

  const js = ts.transpileModule(PROGRAM, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ES2022 } }).outputText;
  fs.writeFileSync(path.join(dir, 'client.mjs'), js);
  const mod = (await import(pathToFileURL(path.join(dir, 'client.mjs')).href)) as { run(b: string, o: string): Promise<Record<string, unknown>> };
  const r = await mod.run(baseUrl, PUBLIC_ORIGIN).catch((e: any) => { throw new Error(`${e.message}: ${e.cause?.message ?? ''}`); });
  t.match(r.org, /^org_/);
  t.same({ ...r, org: undefined }, { org: undefined, machines: 0, next: null, status: 404, code: 'not_found' }, 'calls through the generated client');
});
