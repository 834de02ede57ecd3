import type { Principal } from '../context.js';
import type { Actor } from './events.js';

/** The user or API key behind a request, as recorded in events and as a session's opener. */
export function actorOf(p: Principal): Actor & { type: 'user' | 'api_key'; id: string } {
  return p.kind === 'api_key' && p.api_key_id ? { type: 'api_key', id: p.api_key_id } : { type: 'user', id: p.user_id };
}

export const SYSTEM: Actor = { type: 'system', id: null };
