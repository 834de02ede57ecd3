/**
 * Role and scope tables, as data, copied from the spec's Authentication section. Pure: no I/O.
 */
import type { Permission, Role, Scope } from '../../../shared/schemas/org.js';
import { PERMISSIONS } from '../../../shared/schemas/org.js';

export const ROLE_PERMISSIONS: Readonly<Record<Role, readonly Permission[]>> = {
  owner: PERMISSIONS,
  admin: PERMISSIONS.filter((p) => p !== 'billing:manage'),
  member: ['machines:create', 'machines:control', 'snapshots:write', 'ports:write', 'secrets:write'],
};

/** What each API key scope grants. Read scopes grant nothing: reads are gated by membership alone. */
export const SCOPE_GRANTS: Readonly<Record<Scope, readonly Permission[]>> = {
  'machines:read': [],
  'snapshots:read': [],
  'templates:read': [],
  'sessions:read': [],
  'usage:read': [],
  'ports:read': [],
  'machines:write': ['machines:create', 'machines:delete'],
  'machines:control': ['machines:control'],
  'snapshots:write': ['snapshots:write', 'snapshots:delete'],
  'templates:write': ['templates:write'],
  'ports:write': ['ports:write'],
  'secrets:write': ['secrets:write'],
  'sessions:write': [],
};

export function rolePermissions(role: Role): Set<Permission> {
  return new Set(ROLE_PERMISSIONS[role]);
}

/**
 * A key's power: what its scopes grant, intersected with what its creator may do in the organization
 * right now. Evaluated on every request, so a permission taken from the creator is lost by the key.
 */
export function keyPermissions(scopes: readonly Scope[], creatorRole: Role | null): Set<Permission> {
  if (!creatorRole) return new Set();
  const creator = rolePermissions(creatorRole);
  const out = new Set<Permission>();
  for (const s of scopes) for (const p of SCOPE_GRANTS[s]) if (creator.has(p)) out.add(p);
  return out;
}

/**
 * Who may hand out or take away the owner role: only an owner. Without this an admin (who holds
 * members:manage) could promote themselves or demote every owner.
 */
export function canAssignRole(actor: Role, target: { from: Role | null; to: Role | null }): boolean {
  if (actor === 'owner') return true;
  return target.from !== 'owner' && target.to !== 'owner';
}
