/**
 * A restore drops open connections (spec: "open connections are dropped"): an attached terminal socket is
 * closed when the restore starts, and after the restore the machine answers on fresh connections.
 */
import t from 'tap';
import { CLOSE_CODES } from '../../shared/schemas/gateway.js';
import { startGatewayRig } from '../helpers/gateway-rig.js';
import { open } from '../helpers/gateway-ws.js';

t.test('restore closes attached terminals; the machine answers afterwards', { timeout: 120_000 }, async (t) => {
  const g = await startGatewayRig(t);
  const base = `/v1/machines/${g.machineId}`;
  const { key } = await g.rig.key(g.tenant.cookie, ['machines:control', 'snapshots:write']);
  const snap = await g.rig.call('POST', '/v1/snapshots?wait=true', { key, body: { machine_id: g.machineId } });
  t.equal(snap.status, 201);

  const term = await g.api('POST', `${base}/terminals`, { command: ['sh', '-c', 'while read l; do echo "got-$l"; done'], cols: 80, rows: 24 });
  t.equal(term.status, 200);
  const c = await open(`${g.wsBase}${base}/terminals/${term.json.id}/attach`, g.auth);
  c.ws.send(Buffer.from('one\n'));
  await c.waitFor(() => Buffer.concat(c.binaries).includes('got-one'), 'got-one');

  const r = await g.rig.call('POST', `${base}/restore`, { key, body: { snapshot_id: snap.json.id } });
  t.equal(r.status, 200);
  t.equal(r.json.state, 'running');
  const closed = await c.closedP;
  t.equal(closed.code, CLOSE_CODES.compute_unavailable, 'the attached terminal was dropped by the restore');
  t.same(c.text('exit'), [], 'a dropped stream is not reported as the program exiting');
  const ex = await g.api('POST', `${base}/exec`, { command: ['echo', 'after'] });
  t.equal(ex.status, 200, 'the machine answers on a fresh connection');
  t.equal(ex.json.stdout, 'after\n');
});
