/**
 * The drain's plan as data (domain/drain.ts), pinned literally: what happens to a machine on a draining host by its
 * state, and where a move stands read back from its records (a step begun and not done is the next one again).
 */
import t from 'tap';
import { DRAIN_PLANS, openMove, START_MOVE_STEPS, stateForStep, type DrainRecord } from '../../control-plane/src/domain/drain.js';
import { MachineState } from '../../shared/schemas/machine.js';

const A = 'host_aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'host_bbbbbbbbbbbbbbbbbbbbbbbb';

t.test('the plan for each machine state', async (t) => {
  const table = Object.fromEntries(MachineState.options.map((s) => {
    const p = DRAIN_PLANS[s];
    return [s, p.kind === 'move' ? p.steps.join(' → ') : `wait: ${p.reason}`];
  }));
  t.same(table, {
    creating: 'wait: the machine is being created: it moves once it is running or stopped',
    running: 'stop → capture → pull → make_disk → rehome → start',
    stopping: 'wait: the machine is stopping: it moves once it is stopped',
    stopped: 'capture → pull → make_disk → rehome',
    starting: 'wait: the machine is starting: it moves once it is running',
    error: 'capture → pull → make_disk → rehome',
    deleting: 'wait: the machine is being deleted: the host is empty once it is gone',
  });
});

t.test('the state each step needs', async (t) => {
  t.same(stateForStep('stop', 'running'), ['running', 'stopping', 'stopped']);
  t.same(stateForStep('capture', 'running'), ['stopped']);
  t.same(stateForStep('rehome', 'error'), ['error']);
  t.same(stateForStep('start', 'running'), ['stopped', 'starting', 'running']);
});

t.test('where a move stands, from its records', async (t) => {
  const planned: DrainRecord = { seq: 10, type: 'drain.planned', from: A, to: B, was: 'running', steps: ['stop', 'capture', 'pull', 'make_disk', 'rehome', 'start'] };
  const step = (seq: number, s: 'stop' | 'capture' | 'pull', phase: 'begun' | 'done', chain: string | null = null): DrainRecord =>
    ({ seq, type: 'drain.step', from: A, to: B, step: s, phase, bytes: null, chain });
  t.equal(openMove([]), null, 'never planned');
  t.same(openMove([planned]), { plannedSeq: 10, why: null, from: A, to: B, was: 'running', steps: planned.steps, done: [], chain: null, next: 'stop' });
  const midway = [planned, step(11, 'stop', 'begun'), step(12, 'stop', 'done'), step(13, 'capture', 'begun'), step(14, 'capture', 'done', 'lyr_1'), step(15, 'pull', 'begun')];
  t.same(openMove(midway), { plannedSeq: 10, why: null, from: A, to: B, was: 'running', steps: planned.steps, done: ['stop', 'capture'], chain: 'lyr_1', next: 'pull' },
    'a step begun and not done is next again; the capture\'s chain is kept');
  t.equal(openMove([...midway, { seq: 16, type: 'drain.finished', from: A, to: B, state: 'running' }]), null, 'finished');
  const again: DrainRecord = { ...planned, seq: 20, from: B, to: A, was: 'stopped', steps: ['capture'] };
  t.same(openMove([...midway, { seq: 16, type: 'drain.finished', from: A, to: B, state: 'running' }, again])?.next, 'capture', 'a later drain starts afresh');
  const startMove: DrainRecord = { seq: 30, type: 'drain.planned', from: A, to: B, was: 'stopped', steps: [...START_MOVE_STEPS], why: 'start' };
  t.same([openMove([startMove])?.why, openMove([startMove])?.steps, openMove([startMove])?.next], ['start', ['capture', 'pull', 'make_disk', 'rehome', 'start'], 'capture'],
    "a start's move: the at-rest steps then the start, named by its plan");
});
