import { z } from 'zod';
import { Email } from './auth.js';

/** A membership has exactly one role; a role is a fixed permission set (see the control plane's rbac table). */
export const ROLES = ['owner', 'admin', 'member'] as const;
export const Role = z.enum(ROLES);
export type Role = z.infer<typeof Role>;

export const PERMISSIONS = [
  'machines:create',
  'machines:control',
  'machines:delete',
  'snapshots:write',
  'snapshots:delete',
  'templates:write',
  'ports:write',
  'secrets:write',
  'members:manage',
  'api_keys:manage',
  'billing:manage',
] as const;
export const Permission = z.enum(PERMISSIONS);
export type Permission = z.infer<typeof Permission>;

/** API key scopes. They narrow a key's power and never widen it. */
export const SCOPES = [
  'machines:read',
  'snapshots:read',
  'templates:read',
  'sessions:read',
  'usage:read',
  'ports:read',
  'machines:write',
  'machines:control',
  'snapshots:write',
  'templates:write',
  'ports:write',
  'secrets:write',
  'sessions:write',
] as const;
export const Scope = z.enum(SCOPES);
export type Scope = z.infer<typeof Scope>;

export const InvitationState = z.enum(['pending', 'accepted', 'revoked', 'expired']);
export type InvitationState = z.infer<typeof InvitationState>;

export const UpdateMemberRequest = z.strictObject({ role: Role });
export type UpdateMemberRequest = z.infer<typeof UpdateMemberRequest>;

export const CreateInvitationRequest = z.strictObject({ email: Email, role: Role });
export type CreateInvitationRequest = z.infer<typeof CreateInvitationRequest>;

export const AcceptInvitationRequest = z.strictObject({ token: z.string().min(1).max(256) });
export type AcceptInvitationRequest = z.infer<typeof AcceptInvitationRequest>;

export const CreateApiKeyRequest = z.strictObject({
  name: z.string().trim().min(1).max(100),
  scopes: z
    .array(Scope)
    .max(SCOPES.length)
    .refine((s) => new Set(s).size === s.length, 'scopes must not repeat'),
});
export type CreateApiKeyRequest = z.infer<typeof CreateApiKeyRequest>;
