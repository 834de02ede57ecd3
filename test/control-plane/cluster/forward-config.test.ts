/**
 * Where the internal listener opens (INTERNAL_HOST, INTERNAL_PORT in control-plane/src/config.ts; docs/cluster.md):
 * loopback and a free port by default, and never on the tenant-facing port or the metrics port — such a
 * configuration is refused at start, naming the setting, rather than left to fail or to share a port.
 */
import t from 'tap';
import { AppError } from '../../../shared/errors.js';
import { parseConfig } from '../../../control-plane/src/config.js';

function refusal(env: Record<string, string>) {
  try {
    parseConfig(env);
  } catch (e) {
    if (e instanceof AppError) return { code: e.code, details: e.details };
    throw e;
  }
  return null;
}

const NOT_TENANT_FACING = { field: 'INTERNAL_PORT', message: 'must differ from PORT and METRICS_PORT: the internal listener is never the tenant-facing one' };

t.test('defaults, a chosen address, and the ports it may not share', async (t) => {
  t.same(parseConfig({}).internal, { host: '127.0.0.1', port: 0 });
  t.same(parseConfig({ INTERNAL_HOST: '10.8.0.2', INTERNAL_PORT: '7070' }).internal, { host: '10.8.0.2', port: 7070 });
  t.same(refusal({ PORT: '8080', INTERNAL_PORT: '8080' }), { code: 'invalid_request', details: [NOT_TENANT_FACING] });
  t.same(refusal({ INTERNAL_PORT: '8080' }), { code: 'invalid_request', details: [NOT_TENANT_FACING] }, 'PORT defaults to 8080');
  t.same(refusal({ METRICS_PORT: '9100', INTERNAL_PORT: '9100' }), { code: 'invalid_request', details: [NOT_TENANT_FACING] });
  t.same(refusal({ INTERNAL_PORT: '70000' })?.details.map((d) => d.field), ['INTERNAL_PORT']);
  t.same(refusal({ INTERNAL_PORT: 'seven' })?.details.map((d) => d.field), ['INTERNAL_PORT']);
  t.same(parseConfig({ PORT: '0', INTERNAL_PORT: '0' }).internal.port, 0, 'two free ports are two ports');
});
