/**
 * Published ports (previews). Unpublishing sets deleted_at and keeps the row, so an id is never
 * issued again; reads see live previews of live machines only.
 */
import type { PreviewAccess } from '../../../../shared/schemas/ports.js';
import type { Db } from '../db.js';
import type { Keyset } from '../pagination.js';
import { dialect } from './dialect.js';
import { one } from './results.js';

export interface PreviewRow {
  id: string;
  org_id: string;
  machine_id: string;
  port: number;
  name: string | null;
  access: PreviewAccess;
  /** SHA-256 hex of the bearer secret (private only). */
  secret_hash: string | null;
  /** SHA-256 hex of the one-shot access link's token; null once used (and for public). */
  access_token_hash: string | null;
  /** SHA-256 hex of the browser cookie the access link handed out; null before that. */
  cookie_hash: string | null;
  last_request_at: string | null;
  created_at: string;
  deleted_at: string | null;
}

export function previewsRepo(db: Db) {
  const d = dialect(db.engine);
  /** Live previews of live machines (`p`). */
  const live = () =>
    db.q().selectFrom('previews as p').selectAll('p').where('p.deleted_at', 'is', null)
      .where((eb) => eb.exists(eb.selectFrom('machines as m').select('m.id').whereRef('m.id', '=', 'p.machine_id').where('m.deleted_at', 'is', null)));
  return {
    async insert(r: PreviewRow): Promise<void> {
      await db.q().insertInto('previews').values(r).execute();
    },
    /** A live preview, whatever its organization (the proxy resolves hostnames with it). */
    live: (id: string): Promise<PreviewRow | undefined> => live().where('p.id', '=', id).executeTakeFirst(),
    inOrg: (orgId: string, machineId: string, id: string): Promise<PreviewRow | undefined> =>
      live().where('p.org_id', '=', orgId).where('p.machine_id', '=', machineId).where('p.id', '=', id).executeTakeFirst(),
    onPort: (machineId: string, port: number): Promise<PreviewRow | undefined> =>
      db.q().selectFrom('previews').selectAll().where('machine_id', '=', machineId).where('port', '=', port).where('deleted_at', 'is', null)
        .executeTakeFirst(),
    page: (orgId: string, machineId: string | null, after: Keyset, limit: number): Promise<PreviewRow[]> =>
      live()
        .where((eb) => eb.and([eb('p.org_id', '=', orgId), ...(machineId === null ? [] : [eb('p.machine_id', '=', machineId)]), d.after(eb, after, 'p')]))
        .orderBy('p.created_at', d.asc).orderBy('p.id', d.asc).limit(limit).execute(),
    /** Compare-and-set: only a live row is unpublished, once. */
    markDeleted: async (id: string, at: string): Promise<boolean> =>
      one(await db.q().updateTable('previews').set({ deleted_at: at }).where('id', '=', id).where('deleted_at', 'is', null).executeTakeFirst()),
    /** The one-shot trade: succeeds once, for the token that was issued. */
    useAccessToken: async (id: string, tokenHash: string, cookieHash: string): Promise<boolean> =>
      one(
        await db.q().updateTable('previews').set({ access_token_hash: null, cookie_hash: cookieHash })
          .where('id', '=', id).where('access_token_hash', '=', tokenHash).where('deleted_at', 'is', null).executeTakeFirst(),
      ),
    async touch(id: string, at: string): Promise<void> {
      await db.q().updateTable('previews').set({ last_request_at: at }).where('id', '=', id).where('deleted_at', 'is', null).execute();
    },
  };
}
export type PreviewsRepo = ReturnType<typeof previewsRepo>;
