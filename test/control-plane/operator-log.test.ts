/**
 * The operator's view of failures (issue 14 item 9): a machine failure line names the machine, the operation,
 * the error code and the cause chain, with credentials redacted; request lines carry the machine id of
 * /v1/machines/{id}/… routes (only when it has the shape of one).
 */
import t from 'tap';
import { causeChain, machineFailureLine, redact } from '../../control-plane/src/log.js';
import { FakeSubstrate } from '../../control-plane/src/substrate/fake.js';
import { AppError } from '../../shared/errors.js';
import { makeMachinesRig } from '../helpers/machines-rig.js';

const TOKEN = 'q'.repeat(20) + 'Z9_-'.repeat(6);

t.test('cause chain and redaction', async (t) => {
  const inner = Object.assign(new Error(`Command failed: podman --root /srv/substrate/podman/root start computer-mch_1\nError: container state improper token=${TOKEN}`), { code: 125 });
  const e = new AppError('compute_unavailable', 'podman start failed', { cause: inner });
  t.equal(
    causeChain(e),
    'AppError(compute_unavailable): podman start failed <- Error(125): Command failed: podman --root /srv/substrate/podman/root start computer-mch_1 Error: container state improper token=[redacted]',
  );
  t.same(machineFailureLine('mch_abc', 'start', e), {
    event: 'machine_operation_failed', machine_id: 'mch_abc', operation: 'start', code: 'compute_unavailable',
    cause: 'AppError(compute_unavailable): podman start failed <- Error(125): Command failed: podman --root /srv/substrate/podman/root start computer-mch_1 Error: container state improper token=[redacted]',
  });
  t.equal(machineFailureLine('mch_abc', 'run', new Error('x')).code, 'internal_error');
  t.equal(redact('authorization: Bearer abc.def ghi'), 'authorization: Bearer [redacted] ghi');
  t.equal(redact('key sk_live_abc123 used'), 'key [redacted] used');
  t.notMatch(causeChain(new Error(TOKEN)), TOKEN);
  t.equal(causeChain('plain string'), 'string: plain string');
  // A cycle or a deep chain stops at six levels.
  const a: any = new Error('a');
  a.cause = a;
  t.equal(causeChain(a).split(' <- ').length, 6);
});

t.test('request lines carry machine_id', async (t) => {
  const rig = await makeMachinesRig({ substrate: new FakeSubstrate(), services: { readyProbe: false } });
  t.teardown(() => rig.close());
  const { key } = await rig.tenant();
  const c = await rig.call('POST', '/v1/machines', { key, body: { name: 'logged' } });
  t.equal(c.status, 201);
  const id = c.json.id as string;
  await rig.call('GET', `/v1/machines/${id}`, { key });
  await rig.call('POST', `/v1/machines/${id}/stop`, { key });
  await rig.call('GET', '/v1/machines/not-an-id', { key });
  const lines = rig.logs.filter((l) => l.event === 'request');
  t.same(lines.filter((l) => l.machine_id === id).map((l) => l.operation), ['machines.get', 'machines.stop']);
  t.equal(lines.find((l) => l.operation === 'machines.create')?.machine_id, null, 'a create names no machine yet');
  t.notOk(lines.some((l) => l.machine_id === 'not-an-id'), 'raw input never reaches the log');
});
