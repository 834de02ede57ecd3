/** Agents in tests hold a key the way production agents do: enrolled once (agent/src/enrollment.ts). */
import { Enrollment } from '../../agent/src/enrollment.js';
import type { H2Client } from './h2-client.js';

/**
 * An in-process agent's credential, already enrolled with `key` through the channel rule (the first enrollment
 * on a host-only channel is the host's): for tests that reach the app directly rather than through AgentPool.
 */
export function enrolledWith(key: string): Enrollment {
  const e = new Enrollment({ kind: 'channel' });
  if (!e.enroll(null, key)) throw new Error('enrollment refused');
  return e;
}

/**
 * AgentPool's enrollment over a test client's session: confirm `key` where the agent process already holds it,
 * else enroll a fresh process with the proof `issue` provides (a one-time secret, or null on a host-only
 * channel). Resolves with the final status (204: enrolled).
 */
export async function enrollOver(c: H2Client, key: string, issue: () => Promise<string | null>): Promise<number> {
  const first = await c.request('POST', '/auth/enroll', { key }, { authorization: `Bearer ${key}` });
  if (first.status === 204) return 204;
  const proof = await issue();
  return (await c.request('POST', '/auth/enroll', { key }, proof === null ? { authorization: '' } : { authorization: `Bearer ${proof}` })).status;
}
