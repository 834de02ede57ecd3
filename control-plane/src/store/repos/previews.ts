/**
 * Published ports (previews). Unpublishing sets deleted_at and keeps the row, so an id is never
 * issued again; reads see live previews of live machines only.
 */
import type { PreviewAccess } from '../../../../shared/schemas/ports.js';
import type { Db } from '../db.js';
import { afterSql, type Keyset } from '../pagination.js';

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

const LIVE = `p.deleted_at IS NULL AND EXISTS (SELECT 1 FROM machines m WHERE m.id = p.machine_id AND m.deleted_at IS NULL)`;

export function previewsRepo(db: Db) {
  return {
    async insert(r: PreviewRow): Promise<void> {
      await db.run(
        `INSERT INTO previews (id,org_id,machine_id,port,name,access,secret_hash,access_token_hash,cookie_hash,last_request_at,created_at,deleted_at)
         VALUES (@id,@org_id,@machine_id,@port,@name,@access,@secret_hash,@access_token_hash,@cookie_hash,@last_request_at,@created_at,@deleted_at)`,
        { ...r },
      );
    },
    /** A live preview, whatever its organization (the proxy resolves hostnames with it). */
    live: (id: string) => db.get<PreviewRow>(`SELECT p.* FROM previews p WHERE p.id = ? AND ${LIVE}`, [id]),
    inOrg: (orgId: string, machineId: string, id: string) =>
      db.get<PreviewRow>(`SELECT p.* FROM previews p WHERE p.org_id = ? AND p.machine_id = ? AND p.id = ? AND ${LIVE}`, [orgId, machineId, id]),
    onPort: (machineId: string, port: number) =>
      db.get<PreviewRow>('SELECT * FROM previews WHERE machine_id = ? AND port = ? AND deleted_at IS NULL', [machineId, port]),
    page: (orgId: string, machineId: string | null, after: Keyset, limit: number) =>
      db.all<PreviewRow>(
        `SELECT p.* FROM previews p WHERE p.org_id = @org AND (@mid IS NULL OR p.machine_id = @mid) AND ${LIVE}
         AND ${afterSql('p')} ORDER BY p.created_at, p.id LIMIT @limit`,
        { org: orgId, mid: machineId, ca: after.created_at, cid: after.id, limit },
      ),
    /** Compare-and-set: only a live row is unpublished, once. */
    markDeleted: async (id: string, at: string) => (await db.run('UPDATE previews SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL', [at, id])).changes === 1,
    /** The one-shot trade: succeeds once, for the token that was issued. */
    useAccessToken: async (id: string, tokenHash: string, cookieHash: string) =>
      (await db.run(
        'UPDATE previews SET access_token_hash = NULL, cookie_hash = ? WHERE id = ? AND access_token_hash = ? AND deleted_at IS NULL',
        [cookieHash, id, tokenHash],
      )).changes === 1,
    touch: async (id: string, at: string): Promise<void> => {
      await db.run('UPDATE previews SET last_request_at = ? WHERE id = ? AND deleted_at IS NULL', [at, id]);
    },
  };
}
export type PreviewsRepo = ReturnType<typeof previewsRepo>;
