/**
 * The seam (control-plane/src/cluster/forward/owner.ts): for a request naming a machine, serve here, forward to the
 * owner, or refuse — the table pinned literally, including that a request which already crossed the channel is
 * never forwarded again and that an owner lookup that fails is a retryable 503, never a 500.
 */
import t from 'tap';
import { decideRoute, route, type Owner, type Route } from '../../../control-plane/src/cluster/forward/owner.js';

const REMOTE: Owner = { kind: 'remote', processId: 'cp-b', address: 'http://10.0.0.2:7070' };

const view = (r: Route) => (r.kind === 'refuse' ? { kind: r.kind, code: r.error.code, message: r.error.message, headers: r.error.headers } : r);
const UNREACHABLE = { kind: 'refuse', code: 'compute_unavailable', message: "The machine's host is not reachable right now; retry shortly.", headers: { 'retry-after': '2' } };
const MOVED = { kind: 'refuse', code: 'compute_unavailable', message: "The machine's host changed while the request was on its way; retry.", headers: { 'retry-after': '2' } };

t.test('the decision table', async (t) => {
  t.same(view(decideRoute({ kind: 'local' }, 'tenant')), { kind: 'serve' });
  t.same(view(decideRoute(REMOTE, 'tenant')), { kind: 'forward', target: REMOTE });
  t.same(view(decideRoute(null, 'tenant')), UNREACHABLE);
  t.same(view(decideRoute({ kind: 'local' }, 'forwarded')), { kind: 'serve' });
  t.same(view(decideRoute(REMOTE, 'forwarded')), MOVED);
  t.same(view(decideRoute(null, 'forwarded')), UNREACHABLE);
});

t.test('route asks OwnerOf only for a machine, and a failed lookup is a 503', async (t) => {
  const asked: string[] = [];
  const ownerOf = async (id: string): Promise<Owner> => {
    asked.push(id);
    if (id === 'mch_broken') throw new Error('connection refused (the database)');
    return id === 'mch_here' ? { kind: 'local' } : REMOTE;
  };
  t.same(view(await route(ownerOf, null, 'tenant')), { kind: 'serve' });
  t.same(view(await route(ownerOf, 'mch_here', 'tenant')), { kind: 'serve' });
  t.same(view(await route(ownerOf, 'mch_there', 'tenant')), { kind: 'forward', target: REMOTE });
  t.same(view(await route(ownerOf, 'mch_there', 'forwarded')), MOVED);
  t.same(view(await route(ownerOf, 'mch_broken', 'tenant')), UNREACHABLE);
  t.same(asked, ['mch_here', 'mch_there', 'mch_there', 'mch_broken']);
});
