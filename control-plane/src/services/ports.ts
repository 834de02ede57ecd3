/**
 * Published ports (previews): publish, list, read, unpublish, and what the preview proxy asks of them
 * (resolve a hostname, check a credential, trade the one-shot access link, note the last request).
 * Credentials are random 256-bit tokens stored as SHA-256 digests; the secret and the access link
 * exist in the creating answer only.
 */
import { newId } from '../../../shared/ids.js';
import type { Page } from '../../../shared/schemas/pagination.js';
import { PREVIEW_ACCESS_PATH, PREVIEW_COOKIE, type PortListQuery, type Preview, type PublishPortRequest } from '../../../shared/schemas/ports.js';
import { randomBase62, sameDigest, sha256Hex } from '../auth/tokens.js';
import type { Config } from '../config.js';
import type { OrgPrincipal } from '../context.js';
import { readCookies } from '../auth/cookies.js';
import { bearerOf } from '../domain/preview-headers.js';
import { previewDomainOf, previewOrigin } from '../domain/preview-hostnames.js';
import { pageOf } from '../store/pagination.js';
import type { PreviewRow } from '../store/repos/previews.js';
import type { Store } from '../store/store.js';
import { againOnUnique } from '../store/unique-violation.js';
import type { QuotaService } from './quotas.js';
import { ERRORS } from '../errors.js';

/** `last_request_at` is written at most this often per preview (it is a coarse "last reached"). */
export const TOUCH_INTERVAL_MS = 30_000;
/** Bearer secrets of previews: `prs_` + 43 base62 characters (~256 bits). */
const SECRET_PREFIX = 'prs_';

export interface PortServiceDeps {
  store: Store;
  config: Pick<Config, 'previewDomain' | 'host' | 'publicBaseUrl'>;
  now: () => Date;
  /** Publishing creates a preview: refused unless the account may create anything (spec: subscription). */
  quotas: Pick<QuotaService, 'checkSubscription'>;
}

export type PreviewCredential = { ok: true; dropAuthorization: boolean } | { ok: false };

export function createPortService(d: PortServiceDeps) {
  const { store } = d;
  const domain = previewDomainOf(d.config);
  const at = () => d.now().toISOString();
  const touched = new Map<string, number>();
  const unpublishedListeners = new Set<(previewId: string) => void>();

  function origin(id: string): string {
    return previewOrigin(id, domain!, d.config.publicBaseUrl);
  }

  /** Every read: `secret` null for private (absent for public) and `access_url` null. */
  function view(r: PreviewRow, created?: { secret: string | null; accessToken: string | null }): Preview {
    const v: Preview = {
      id: r.id, machine_id: r.machine_id, port: r.port, name: r.name, access: r.access,
      url: domain ? `${origin(r.id)}/` : '',
      access_url: created?.accessToken ? `${origin(r.id)}${PREVIEW_ACCESS_PATH}?token=${created.accessToken}` : null,
      last_request_at: r.last_request_at, created_at: r.created_at,
    };
    if (r.access === 'private') v.secret = created?.secret ?? null;
    return v;
  }

  async function machineOf(orgId: string, machineId: string) {
    const m = await store.machines.inOrg(orgId, machineId);
    if (!m) throw ERRORS.noSuchMachine();
    return m;
  }

  return {
    /** The domain previews answer under, or null when this deployment serves none. */
    domain,

    /**
     * Publishing a port that is already published returns that preview (created: false) without its
     * secret or access link: those are shown once. Nothing needs to listen on the port yet. Two publishes racing
     * past the check (PostgreSQL, two processes) end the same way: the loser's insert is refused by the unique
     * index and its transaction runs again, finding the winner's preview.
     */
    async publish(p: OrgPrincipal, machineId: string, req: PublishPortRequest): Promise<{ preview: Preview; created: boolean }> {
      if (!domain) throw ERRORS.noPreviewDomain();
      const orgId = p.org_id;
      return againOnUnique(() => store.db.tx(async () => {
        const m = await machineOf(orgId, machineId);
        if (m.state === 'deleting') throw ERRORS.machineBeingDeleted();
        // Before the idempotent answer too: a canceled account is told why, whether or not the port was published.
        await d.quotas.checkSubscription(orgId);
        const existing = await store.previews.onPort(m.id, req.port);
        if (existing) return { preview: view(existing), created: false };
        const secret = req.access === 'private' ? `${SECRET_PREFIX}${randomBase62(43)}` : null;
        const accessToken = req.access === 'private' ? randomBase62(43) : null;
        const row: PreviewRow = {
          id: newId('preview'), org_id: orgId, machine_id: m.id, port: req.port, name: req.name ?? null, access: req.access,
          secret_hash: secret && sha256Hex(secret), access_token_hash: accessToken && sha256Hex(accessToken), cookie_hash: null,
          last_request_at: null, created_at: at(), deleted_at: null,
        };
        await store.previews.insert(row);
        return { preview: view(row, { secret, accessToken }), created: true };
      }));
    },

    async list(orgId: string, machineId: string, q: PortListQuery): Promise<Page<Preview>> {
      await machineOf(orgId, machineId);
      return pageOf(q, (after, limit) => store.previews.page(orgId, machineId, after, limit), (r) => view(r));
    },

    listOrg(orgId: string, q: PortListQuery): Promise<Page<Preview>> {
      return pageOf(q, (after, limit) => store.previews.page(orgId, null, after, limit), (r) => view(r));
    },

    async get(orgId: string, machineId: string, id: string): Promise<Preview> {
      await machineOf(orgId, machineId);
      const r = await store.previews.inOrg(orgId, machineId, id);
      if (!r) throw ERRORS.noSuchPublishedPort();
      return view(r);
    },

    /** The hostname stops answering at once: open connections are cut by the proxy's listener. */
    async unpublish(p: OrgPrincipal, machineId: string, id: string): Promise<void> {
      const orgId = p.org_id;
      await store.db.tx(async () => {
        await machineOf(orgId, machineId);
        const r = await store.previews.inOrg(orgId, machineId, id);
        if (!r || !(await store.previews.markDeleted(r.id, at()))) throw ERRORS.noSuchPublishedPort();
      });
      touched.delete(id);
      for (const l of unpublishedListeners) l(id);
    },

    /** The preview proxy cuts a preview's open connections from here. Returns the unsubscribe. */
    onUnpublished(listener: (previewId: string) => void): () => void {
      unpublishedListeners.add(listener);
      return () => unpublishedListeners.delete(listener);
    },

    // --- what the preview proxy needs -----------------------------------------------------------

    /** A live preview of a live machine, or null (unknown, unpublished, machine deleted). */
    async resolve(id: string): Promise<PreviewRow | null> {
      return (await store.previews.live(id)) ?? null;
    },

    origin,

    /**
     * Security gate for a private preview: `Authorization: Bearer <secret>` (then dropped before the
     * guest sees it), or the cookie the access link handed out. The cookie is honoured only without an
     * Origin or with the preview's own: sibling previews share a site, so SameSite alone would let one
     * tenant's page drive another's private preview (cross-site WebSocket or form posts).
     */
    authorize(r: PreviewRow, h: { authorization?: string; cookie?: string; origin?: string }): PreviewCredential {
      if (r.access === 'public') return { ok: true, dropAuthorization: false };
      const bearer = bearerOf(h.authorization);
      if (bearer && r.secret_hash && sameDigest(sha256Hex(bearer), r.secret_hash)) return { ok: true, dropAuthorization: true };
      // Any of the preview cookies the request carries may be this preview's: a sibling preview can set
      // `computer_preview=junk` for the shared parent domain, and taking only the first would lock the
      // visitor out (docs/security.md, "Cookie tossing").
      if (!r.cookie_hash || (h.origin !== undefined && h.origin !== origin(r.id))) return { ok: false };
      const hash = r.cookie_hash;
      return readCookies(h.cookie, PREVIEW_COOKIE).some((c) => sameDigest(sha256Hex(c), hash)) ? { ok: true, dropAuthorization: false } : { ok: false };
    },

    /** The one-shot access link: the first use of the issued token returns the cookie value, later ones null. */
    async trade(r: PreviewRow, token: string): Promise<string | null> {
      if (!r.access_token_hash || !/^[0-9A-Za-z]{43}$/.test(token) || !sameDigest(sha256Hex(token), r.access_token_hash)) return null;
      const cookie = randomBase62(43);
      return (await store.previews.useAccessToken(r.id, r.access_token_hash, sha256Hex(cookie))) ? cookie : null;
    },

    /** Records a request, writing `last_request_at` at most every TOUCH_INTERVAL_MS per preview. */
    touch(id: string): void {
      const now = d.now().getTime();
      const last = touched.get(id);
      if (last !== undefined && now - last < TOUCH_INTERVAL_MS) return;
      touched.set(id, now);
      // In the background (the proxy does not wait on it); a store closed at shutdown records nothing.
      store.previews.touch(id, new Date(now).toISOString()).catch(() => undefined);
    },
  };
}
export type PortService = ReturnType<typeof createPortService>;
