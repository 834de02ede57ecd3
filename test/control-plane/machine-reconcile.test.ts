/**
 * The start-up reconciler's decision table (domain/machine-reconcile.ts), pinned row by row: for each state a
 * previous run can leave a machine in and each thing the host can say of it, the action written out.
 */
import t from 'tap';
import { MachineState } from '../../shared/schemas/machine.js';
import { RECONCILE, reconcileAction, type HostObservation } from '../../control-plane/src/domain/machine-reconcile.js';

const OBSERVATIONS: HostObservation[] = ['running', 'stopped', 'lost', 'absent'];

t.test('the table, row by row', async (t) => {
  t.same(reconcileAction('creating', 'running'), { do: 'finish_boot', trigger: 'substrate_running' });
  t.same(reconcileAction('creating', 'stopped'), { do: 'fail', operation: 'create' });
  t.same(reconcileAction('creating', 'lost'), { do: 'fail', operation: 'create' });
  t.same(reconcileAction('creating', 'absent'), { do: 'clear_interrupted_create' });

  t.same(reconcileAction('starting', 'running'), { do: 'finish_boot', trigger: 'boot_complete' });
  t.same(reconcileAction('starting', 'stopped'), { do: 'fail', operation: 'start' });
  t.same(reconcileAction('starting', 'lost'), { do: 'fail', operation: 'start' });
  t.same(reconcileAction('starting', 'absent'), { do: 'fail', operation: 'start' });

  t.same(reconcileAction('stopping', 'running'), { do: 'finish_stop', stopFirst: true });
  t.same(reconcileAction('stopping', 'stopped'), { do: 'finish_stop', stopFirst: false });
  t.same(reconcileAction('stopping', 'lost'), { do: 'fail', operation: 'stop' });
  t.same(reconcileAction('stopping', 'absent'), { do: 'fail', operation: 'stop' });

  t.same(reconcileAction('deleting', 'running'), { do: 'finish_delete' });
  t.same(reconcileAction('deleting', 'stopped'), { do: 'finish_delete' });
  t.same(reconcileAction('deleting', 'lost'), { do: 'finish_delete' });
  t.same(reconcileAction('deleting', 'absent'), { do: 'finish_delete' });

  t.same(reconcileAction('running', 'running'), { do: 'nothing' });
  t.same(reconcileAction('running', 'stopped'), { do: 'recover' });
  t.same(reconcileAction('running', 'lost'), { do: 'recover' });
  t.same(reconcileAction('running', 'absent'), { do: 'fail', operation: 'run' });

  t.same(reconcileAction('stopped', 'running'), { do: 'nothing' });
  t.same(reconcileAction('stopped', 'stopped'), { do: 'nothing' });
  t.same(reconcileAction('stopped', 'lost'), { do: 'nothing' });
  t.same(reconcileAction('stopped', 'absent'), { do: 'clear_interrupted_create' });

  t.same(reconcileAction('error', 'running'), { do: 'nothing' });
  t.same(reconcileAction('error', 'stopped'), { do: 'nothing' });
  t.same(reconcileAction('error', 'lost'), { do: 'nothing' });
  t.same(reconcileAction('error', 'absent'), { do: 'nothing' });
});

t.test('every state and every observation has a row, and nothing else', async (t) => {
  t.same(Object.keys(RECONCILE).sort(), [...MachineState.options].sort());
  for (const s of MachineState.options) t.same(Object.keys(RECONCILE[s]).sort(), [...OBSERVATIONS].sort(), s);
});
