import t from 'tap';
import { LatestStartedRead } from '../../agent/src/desktop/mode-reads.js';

// Reads started in the order 0, 1, 2; `finish` is the order their answers come back; `applied` whether each,
// in that finishing order, is applied.
const cases: Array<{ name: string; started: number; finish: number[]; applied: boolean[] }> = [
  { name: 'in the order they started: all applied', started: 3, finish: [0, 1, 2], applied: [true, true, true] },
  { name: 'a read started before a switch answering after the read started after it: dropped', started: 2, finish: [1, 0], applied: [true, false] },
  { name: 'the first to finish and the last to start are applied', started: 3, finish: [1, 0, 2], applied: [true, false, true] },
  { name: 'the last to start finishing first: the others dropped', started: 3, finish: [2, 0, 1], applied: [true, false, false] },
];

for (const c of cases) {
  t.test(c.name, async (t) => {
    const r = new LatestStartedRead();
    const tickets = Array.from({ length: c.started }, () => r.begin());
    t.same(
      c.finish.map((i) => r.keep(tickets[i]!)),
      c.applied,
    );
    t.equal(r.keep(r.begin()), true, 'a read started afterwards is applied again');
  });
}
