/** The CLI's pure parts: errors rendered from the envelope (details, quota + upgrade hint), tables, MACHINE:/path. */
import t from 'tap';
import { ComputerError } from '../../clients/sdk/src/index.js';
import { renderError, table, UsageError } from '../../clients/cli/src/output.js';
import { parseRemote } from '../../clients/cli/src/commands/files.js';

t.test('errors from the envelope', async (t) => {
  const quota = new ComputerError(402, {
    code: 'quota_exceeded',
    message: 'Your plan allows 2 running machines.',
    request_id: 'req_abc',
    details: [],
    quota: { limit: 'running_machines', current: 2, maximum: 2, plan_id: 'developer', upgrade_url: 'https://computer.example.com/billing' },
  });
  // Clients render `quota`, not the message (spec, errors §9): the words come from the quota object.
  t.equal(
    renderError(quota),
    'error: running machines: 2 in use of the developer plan\'s 2 (quota_exceeded, HTTP 402)\n' +
      '  quota: running_machines is at 2 of 2 on plan developer\n' +
      '  upgrade: https://computer.example.com/billing\n' +
      '  request id: req_abc\n',
  );
  // A null maximum is negotiated, never unlimited.
  const negotiated = new ComputerError(402, { code: 'quota_exceeded', message: 'm', request_id: '', details: [], quota: { limit: 'snapshots_per_machine', current: 10, maximum: null, plan_id: 'enterprise', upgrade_url: null } });
  t.equal(
    renderError(negotiated),
    "error: snapshots per machine: 10 in use; the enterprise plan's maximum is negotiated and none is in effect (quota_exceeded, HTTP 402)\n" +
      '  quota: snapshots_per_machine is at 10 of a negotiated maximum on plan enterprise\n' +
      '  upgrade your plan (`GET /v1/plans`) or free capacity to raise this limit\n',
  );
  const of = (quota: { limit: 'subscription'; current: number; maximum: number | null; plan_id: string }) =>
    renderError(new ComputerError(402, { code: 'quota_exceeded', message: 'not shown', request_id: '', details: [], quota: { ...quota, upgrade_url: null } })).split('\n')[0];
  t.equal(of({ limit: 'subscription', current: 0, maximum: 0, plan_id: 'none' }), 'error: the organization has no active subscription (plan none); subscribe to create or start anything (quota_exceeded, HTTP 402)');
  t.equal(of({ limit: 'subscription', current: 0, maximum: null, plan_id: 'enterprise' }), 'error: the enterprise plan is negotiated and no agreement is in effect (quota_exceeded, HTTP 402)');
  t.equal(of({ limit: 'subscription', current: 56, maximum: 56, plan_id: 'pro' }), "error: the trial's included use is used up: 56 of 56 (plan pro) (quota_exceeded, HTTP 402)");
  for (const e of [quota, negotiated]) t.notMatch(renderError(e), /unlimited|Your plan allows/, 'neither "unlimited" nor the message');
  const fields = new ComputerError(400, { code: 'invalid_request', message: 'Invalid request body.', request_id: 'req_1', details: [{ field: 'command.0', message: 'command[0] must name a program' }], quota: null });
  t.equal(renderError(fields), 'error: Invalid request body. (invalid_request, HTTP 400)\n  command.0: command[0] must name a program\n  request id: req_1\n');
  // Server text cannot drive the terminal.
  const esc = new ComputerError(404, { code: 'not_found', message: 'no \u001b[2Jmachine', request_id: '', details: [], quota: null });
  t.equal(renderError(esc), 'error: no \\x1b[2Jmachine (not_found, HTTP 404)\n');
  t.equal(renderError(new UsageError('bad', 'cp SRC DST')), 'error: bad\nusage: cp SRC DST\n');
  const refused = Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }) });
  t.equal(renderError(refused, 'http://127.0.0.1:9'), 'error: cannot reach http://127.0.0.1:9 (ECONNREFUSED); set COMPUTER_BASE_URL or run `computer login --base-url …`\n');
});

t.test('tables and remote paths', async (t) => {
  t.equal(table(['ID', 'NAME'], [['mch_1', 'a'], ['mch_22', null]]), 'ID      NAME\nmch_1   a\nmch_22  -\n');
  t.same(parseRemote('web:/home/agent/x'), { machine: 'web', path: '/home/agent/x' });
  t.same(parseRemote('mch_abc:/'), { machine: 'mch_abc', path: '/' });
  t.equal(parseRemote('./a:/b'), null, 'a local path with a colon after a slash');
  t.equal(parseRemote('web:relative'), null, 'remote paths are absolute');
  t.equal(parseRemote('file.txt'), null);
});
