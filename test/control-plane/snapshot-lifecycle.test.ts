/** The snapshot and template state tables (pure data) and the newest-only rule. */
import t from 'tap';
import {
  decideSnapshot, decideTemplate, snapshotInTheWay, SNAPSHOT_TRANSITIONS, TEMPLATE_TRANSITIONS,
} from '../../control-plane/src/domain/snapshot-lifecycle.js';

t.test('snapshot states', async (t) => {
  t.equal(decideSnapshot(null, 'capture'), 'pending', 'born pending');
  t.equal(decideSnapshot('pending', 'captured'), 'ready');
  t.equal(decideSnapshot('pending', 'capture_failed'), 'error');
  t.equal(decideSnapshot('ready', 'delete'), 'deleting');
  t.equal(decideSnapshot('error', 'delete'), 'deleting');
  t.equal(decideSnapshot('deleting', 'delete'), 'deleting', 'a delete can be retried');
  t.equal(decideSnapshot('pending', 'delete'), null, 'a pending capture cannot be deleted');
  t.equal(decideSnapshot('ready', 'captured'), null);
  t.equal(decideSnapshot('error', 'captured'), null, 'error is final');
  t.equal(SNAPSHOT_TRANSITIONS.length, 6);
});

t.test('template states', async (t) => {
  t.equal(decideTemplate(null, 'create'), 'building');
  t.equal(decideTemplate('building', 'built'), 'ready');
  t.equal(decideTemplate('building', 'build_failed'), 'error');
  t.equal(decideTemplate('ready', 'build_failed'), null);
  t.equal(TEMPLATE_TRANSITIONS.length, 3);
});

t.test('only the newest of a chain may be deleted', async (t) => {
  const chain = [{ id: 'c' }, { id: 'b' }, { id: 'a' }];
  t.equal(snapshotInTheWay(chain, 'c'), null);
  t.same(snapshotInTheWay(chain, 'a'), { id: 'c' });
  t.same(snapshotInTheWay(chain, 'b'), { id: 'c' });
  t.equal(snapshotInTheWay([], 'x'), null);
});
