/** REGION (docs/operations.md, "Hosts"): default `default`, a short slug, anything else refused naming the field. */
import t from 'tap';
import { parseConfig } from '../../control-plane/src/config.js';

t.test('REGION: default, slugs accepted, the rest refused', async (t) => {
  t.equal(parseConfig({}).region, 'default');
  for (const ok of ['eu-west', 'us-east-1', 'a', '0', 'x'.repeat(32)]) t.equal(parseConfig({ REGION: ok }).region, ok, ok);
  for (const bad of ['EU', 'eu_west', '-eu', 'eu-', 'eu west', 'x'.repeat(33), 'ü']) {
    t.throws(() => parseConfig({ REGION: bad }), { code: 'invalid_request', details: [{ field: 'REGION', message: 'a short slug: 1-32 of a-z, 0-9 and -, starting and ending with a letter or digit' }] } as object as Error, bad);
  }
});
