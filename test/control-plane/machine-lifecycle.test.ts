import t from 'tap';
import { MachineState } from '../../shared/schemas/machine.js';
import { TRANSITIONS, conflictMessage, decide, isTransient, sourcesOf, type LifecycleTrigger } from '../../control-plane/src/domain/machine-lifecycle.js';

const ALL_TRIGGERS: LifecycleTrigger[] = [
  'create', 'create_stopped', 'substrate_running', 'stop', 'shutdown_complete', 'start', 'boot_complete',
  'restart', 'restore', 'delete', 'exited', 'recover', 'abandon', 'host_returned', 'fail',
];

t.test('the spec table, row by row', async (t) => {
  t.same(decide(null, 'create'), { ok: true, to: 'creating' });
  t.same(decide(null, 'create_stopped'), { ok: true, to: 'stopped' });
  t.same(decide('creating', 'substrate_running'), { ok: true, to: 'running' });
  t.same(decide('running', 'stop'), { ok: true, to: 'stopping' });
  t.same(decide('stopping', 'shutdown_complete'), { ok: true, to: 'stopped' });
  t.same(decide('stopped', 'start'), { ok: true, to: 'starting' });
  t.same(decide('starting', 'boot_complete'), { ok: true, to: 'running' });
  t.same(decide('running', 'restart'), { ok: true, to: 'stopping' });
  t.same(decide('running', 'exited'), { ok: true, to: 'stopped' }, 'a clean guest shutdown seen by the substrate watch');
  t.same(decide('stopped', 'fail'), { ok: true, to: 'error' }, 'a stopped machine whose create never made its disk');
  t.notOk(decide('stopping', 'exited').ok);
  t.same(decide('running', 'recover'), { ok: true, to: 'starting' }, 'a machine the host lost is started again');
  t.same(decide('starting', 'abandon'), { ok: true, to: 'stopped' }, 'and rests stopped when that fails');
  t.notOk(decide('stopped', 'recover').ok);
  t.same(decide('error', 'host_returned'), { ok: true, to: 'stopped' }, 'a machine whose lost host came back with its disk');
  for (const s of ['running', 'stopped', 'creating', 'starting', 'stopping', 'deleting'] as const) t.notOk(decide(s, 'host_returned').ok);
  for (const s of ['running', 'stopped', 'error', 'creating', 'starting', 'stopping'] as const) t.same(decide(s, 'delete'), { ok: true, to: 'deleting' });
});

t.test('everything else is refused', async (t) => {
  const legal = new Set(TRANSITIONS.map((x) => `${x.from}:${x.trigger}`));
  let refused = 0;
  for (const from of [null, ...MachineState.options]) {
    for (const trig of ALL_TRIGGERS) {
      const d = decide(from, trig);
      t.equal(d.ok, legal.has(`${from}:${trig}`), `${from} ${trig}`);
      if (!d.ok) refused++;
    }
  }
  t.ok(refused > 50);
  t.notOk(decide('deleting', 'delete').ok, 'deleting twice conflicts');
  t.notOk(decide('stopped', 'stop').ok);
  t.notOk(decide('running', 'start').ok);
  t.notOk(decide('error', 'stop').ok, 'error is a rest state: only start or delete leave it');
});

t.test('conflict messages name both states', async (t) => {
  t.match(conflictMessage('stopped', 'stop'), /stopped.*running/);
  t.same(sourcesOf('delete').sort(), ['creating', 'error', 'running', 'starting', 'stopped', 'stopping']);
  t.ok(isTransient('creating'));
  t.notOk(isTransient('error'));
});
