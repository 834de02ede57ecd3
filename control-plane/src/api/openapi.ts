/**
 * The OpenAPI 3.1 document, generated from the mounted operations' declared zod schemas (never written
 * by hand): every op contributes its path, path parameters, query parameters, request body and success
 * answers; every error is the one envelope. Schemas that shared/ exports by name become components.
 */
import { z } from 'zod';
import * as agentProtocol from '../../../shared/agent-protocol.js';
import * as auth from '../../../shared/schemas/auth.js';
import * as billing from '../../../shared/schemas/billing.js';
import * as display from '../../../shared/schemas/display.js';
import * as exec from '../../../shared/schemas/exec.js';
import * as files from '../../../shared/schemas/files.js';
import * as input from '../../../shared/schemas/input.js';
import * as machine from '../../../shared/schemas/machine.js';
import * as org from '../../../shared/schemas/org.js';
import * as ports from '../../../shared/schemas/ports.js';
import * as pty from '../../../shared/schemas/pty.js';
import * as responses from '../../../shared/schemas/responses.js';
import * as secrets from '../../../shared/schemas/secrets.js';
import * as session from '../../../shared/schemas/session.js';
import * as snapshot from '../../../shared/schemas/snapshot.js';
import * as template from '../../../shared/schemas/template.js';
import { ID_PREFIX, idPattern, type IdKind } from '../../../shared/ids.js';
import { pathParams, type Op } from './op.js';

type Json = Record<string, unknown>;

/** Component names: the export names of shared/'s schemas (first export wins). */
function schemaNames(): Map<z.ZodType, string> {
  const names = new Map<z.ZodType, string>();
  const modules = [responses, machine, snapshot, template, secrets, ports, session, org, auth, billing, display, input, files, exec, pty, agentProtocol];
  for (const m of modules) {
    for (const [name, v] of Object.entries(m)) if (v instanceof z.ZodType && !names.has(v) && /^[A-Z]/.test(name)) names.set(v, name);
  }
  return names;
}

const REF = '#/components/schemas/';

/** Converts the registered schemas in one direction (request bodies as input, answers as output). */
function components(schemas: Set<z.ZodType>, names: Map<z.ZodType, string>, io: 'input' | 'output', rename: (n: string) => string): Record<string, Json> {
  const reg = z.registry<{ id: string }>();
  for (const s of schemas) reg.add(s, { id: names.get(s)! });
  const out = z.toJSONSchema(reg, { io, unrepresentable: 'any', uri: (id: string) => REF + rename(id) }).schemas as Record<string, Json>;
  const result: Record<string, Json> = {};
  for (const [id, js] of Object.entries(out)) {
    const { $schema: _s, $id: _i, ...rest } = js;
    result[rename(id)] = rest;
  }
  return result;
}

function inline(schema: z.ZodType, io: 'input' | 'output'): Json {
  const { $schema: _s, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Json;
  return rest;
}

export interface OpenApiOptions {
  /** The API's public base URL (servers[0]). */
  serverUrl: string;
  version?: string;
}

export function buildOpenApi(ops: readonly Op[], o: OpenApiOptions): Json {
  const names = schemaNames();
  const reqSchemas = new Set<z.ZodType>();
  const resSchemas = new Set<z.ZodType>([responses.ErrorEnvelope]);
  for (const op of ops) {
    if (op.body && names.has(op.body)) reqSchemas.add(op.body);
    for (const r of Object.values(op.responses)) if (r instanceof z.ZodType && names.has(r)) resSchemas.add(r);
  }
  const resNames = new Set([...resSchemas].map((s) => names.get(s)!));
  // A schema used both ways whose input differs from its output gets its own `…Input` component.
  const reqName = (n: string) => (resNames.has(n) ? `${n}Input` : n);
  const schemas = { ...components(resSchemas, names, 'output', (n) => n), ...components(reqSchemas, names, 'input', reqName) };
  const ref = (s: z.ZodType, io: 'input' | 'output'): Json => {
    const n = names.get(s);
    if (n && (io === 'output' ? resSchemas : reqSchemas).has(s)) return { $ref: REF + (io === 'output' ? n : reqName(n)) };
    return inline(s, io);
  };

  /** Ids carry their kind's shape (shared/ids.ts) and a secret's name its rule, so a client can check before calling. */
  const pathParamSchema = (name: string): Json => {
    const kind = name.replace(/_id$/, '');
    if (name.endsWith('_id') && isIdKind(kind)) return { type: 'string', pattern: idPattern(kind) };
    if (name === 'name') return inline(secrets.SecretName, 'input');
    return { type: 'string' };
  };

  const paths: Record<string, Record<string, Json>> = {};
  for (const op of ops) {
    const p = '/v1' + op.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const parameters: Json[] = pathParams(op.path).map((name) => ({ name, in: 'path', required: true, schema: pathParamSchema(name) }));
    if (op.query) {
      const q = inline(op.query, 'input') as { properties?: Record<string, Json>; required?: string[] };
      for (const [name, schema] of Object.entries(q.properties ?? {})) {
        parameters.push({ name, in: 'query', required: (q.required ?? []).includes(name), schema });
      }
    }
    const answers: Record<string, Json> = {};
    for (const [status, r] of Object.entries(op.responses)) {
      if (r === 'empty') answers[status] = { description: 'No content.' };
      else if (r === 'redirect') answers[status] = { description: 'Redirect (Location header).' };
      else if (r === 'html') answers[status] = { description: 'An HTML page.', content: { 'text/html': { schema: { type: 'string' } } } };
      else if (r) answers[status] = { description: 'Success.', content: { 'application/json': { schema: ref(r, 'output') } } };
    }
    answers.default = { description: 'Error envelope.', content: { 'application/json': { schema: { $ref: `${REF}ErrorEnvelope` } } } };
    const operation: Json = {
      operationId: op.name.replace(/[._]([a-z])/g, (_m, ch: string) => ch.toUpperCase()),
      summary: op.summary ?? op.name,
      tags: [op.name.split('.')[0]!],
      ...(parameters.length ? { parameters } : {}),
      ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: ref(op.body, 'input') } } } } : {}),
      responses: answers,
      security: op.auth === 'none' ? [] : op.auth === 'session' ? [{ session: [] }] : [{ apiKey: [] }, { session: [] }],
      ...(op.permission ? { 'x-permission': op.permission } : {}),
    };
    (paths[p] ??= {})[op.method] = operation;
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'computer API',
      version: o.version ?? '1',
      description: 'Persistent Linux machines (desktop, shell, browser) for computer-use agents. Errors are always the ErrorEnvelope.',
    },
    servers: [{ url: o.serverUrl }],
    paths,
    components: {
      schemas,
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key (sk_…).' },
        session: {
          type: 'apiKey', in: 'cookie', name: 'computer_session',
          description: 'The browser session cookie: `__Host-computer_session` when the server is reached over https, `computer_session` on plain http. A request carrying two session cookies is refused (401).',
        },
      },
    },
  };
}

function isIdKind(k: string): k is IdKind {
  return Object.hasOwn(ID_PREFIX, k);
}
