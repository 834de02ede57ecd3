/**
 * Errors are raised through the named factories of `control-plane/src/errors.ts` (issue 23 item 4): no call
 * site under control-plane/src builds an AppError or a Retry-After of its own, and the factories the doors'
 * last inline errors moved into answer exactly what those call sites answered (code, status, message,
 * Retry-After, details).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { AppError } from '../../shared/errors.js';
import { ERRORS } from '../../control-plane/src/errors.js';

const SRC = fileURLToPath(new URL('../../control-plane/src/', import.meta.url));

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

t.test('no inline AppError or retry-after outside the table', async (t) => {
  const inline: string[] = [];
  for (const file of tsFiles(SRC)) {
    const rel = relative(SRC, file);
    if (rel === 'errors.ts') continue;
    readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
      if (/new AppError\(|['"]retry-after['"]\s*:/i.test(line)) inline.push(`${rel}:${i + 1}`);
    });
  }
  t.same(inline, []);
});

function shape(e: AppError) {
  return { code: e.code, status: e.status, message: e.message, headers: e.headers, details: e.details };
}

t.test('the doors\' factories answer what their call sites did', async (t) => {
  const unavailable = (message: string, retryAfter: string) => ({ code: 'compute_unavailable', status: 503, message, headers: { 'retry-after': retryAfter }, details: [] });
  t.same(shape(ERRORS.machineSettling('starting')), unavailable('The machine is starting; retry shortly.', '2'));
  t.same(shape(ERRORS.desktopNotUp()), unavailable('The desktop is not up yet; retry shortly.', '2'));
  t.same(shape(ERRORS.agentUnreachable('The machine agent did not answer in time.')), unavailable('The machine agent did not answer in time.', '1'));
  t.same(shape(ERRORS.previewMachineNotRunning()), unavailable('The machine behind this preview is not running.', '5'));
  t.same(shape(ERRORS.previewMachineUnreachable()), unavailable('The machine behind this preview is not reachable right now.', '2'));
  t.same(shape(ERRORS.previewNothingListening()), unavailable("Nothing is answering on this preview's port inside the machine yet.", '2'));
  t.same(shape(ERRORS.previewNoAnswer()), unavailable('The app inside the machine closed the connection or did not answer in time.', '2'));
  t.same(shape(ERRORS.previewMachineBusy()), unavailable('This preview has too many open connections right now; try again in a moment.', '1'));
  t.same(shape(ERRORS.previewBudgetBusy()), unavailable('The service has too many open preview connections right now; try again in a moment.', '1'));
  t.same(shape(ERRORS.mcpOrgSessionLimit(3)), {
    code: 'rate_limited', status: 429, message: 'This organization has 3 open MCP sessions, its limit; close unused ones (DELETE /v1/mcp).', headers: { 'retry-after': '60' }, details: [],
  });
  t.same(shape(ERRORS.mcpServerSessionLimit()), {
    code: 'rate_limited', status: 429, message: 'Too many open MCP sessions on this server; close unused ones (DELETE /v1/mcp).', headers: { 'retry-after': '60' }, details: [],
  });
  t.same(shape(ERRORS.previewPrivate()).headers, { 'www-authenticate': 'Bearer realm="preview"' });
  t.same(shape(ERRORS.previewAccessLinkInvalid()).headers, { 'www-authenticate': 'Bearer realm="preview"' });
  t.same(shape(ERRORS.displaySizeHalfGiven('display_width', 'display_height', 'display_height')), {
    code: 'invalid_request', status: 400, message: 'Give both display_width and display_height, or neither.', headers: {}, details: [{ field: 'display_height', message: 'required with the other' }],
  });
  t.same(shape(ERRORS.mcpTransportRefused('invalid_request', '', 406)).message, 'The MCP transport refused the request (HTTP 406).');
  t.same(shape(ERRORS.noSuchPathItem('term')).message, 'No such term.');
});

t.test('redacted keeps an error\'s code and headers, never its message or details', async (t) => {
  const agentSaid = new AppError('compute_unavailable', 'echo: hunter2', { headers: { 'retry-after': '1' }, details: [{ field: 'text', message: 'hunter2' }] });
  t.same(shape(ERRORS.redacted(agentSaid, 'The machine could not type the secret.')), {
    code: 'compute_unavailable', status: 503, message: 'The machine could not type the secret.', headers: { 'retry-after': '1' }, details: [],
  });
  t.same(shape(ERRORS.redacted(new Error('hunter2'), 'The machine could not type the secret.')), {
    code: 'compute_unavailable', status: 503, message: 'The machine could not type the secret.', headers: {}, details: [],
  });
});
