import { z } from 'zod';

export const SessionType = z.enum(['agent', 'human', 'view']);
export type SessionType = z.infer<typeof SessionType>;
export const SessionState = z.enum(['active', 'idle', 'closed']);
export type SessionState = z.infer<typeof SessionState>;

export const CreateSessionRequest = z.strictObject({
  machine_id: z.string().min(1).max(64),
  type: SessionType,
});
export type CreateSessionRequest = z.infer<typeof CreateSessionRequest>;

export const SessionListQuery = z.strictObject({
  limit: z.string().regex(/^\d+$/, 'must be an integer').transform(Number).pipe(z.number().int().min(1).max(200)).optional(),
  cursor: z.string().min(1).max(512).optional(),
  machine_id: z.string().min(1).max(64).optional(),
  state: SessionState.optional(),
});
export type SessionListQuery = z.infer<typeof SessionListQuery>;

/** DELETE /v1/machines/{id}/input-lease: optionally name the session releasing (must be the holder). */
export const LeaseReleaseQuery = z.strictObject({ session_id: z.string().min(1).max(64).optional() });
export type LeaseReleaseQuery = z.infer<typeof LeaseReleaseQuery>;
