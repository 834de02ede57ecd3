/**
 * Published ports (previews): a port inside a machine served on its own hostname
 * (`prv-<…>.<PREVIEW_DOMAIN>`, docs/api-ports.md). Request bodies are strict; records are what
 * every read returns, plus `secret` and `access_url` filled only in the creating answer.
 */
import { z } from 'zod';
import { PageQuery } from './pagination.js';

/** A TCP port inside the guest (not a host port). */
export const GuestPort = z.number().int().min(1).max(65535);

/** The agent's path parameter: decimal digits only, no sign, no leading zero, 1-65535. */
export const GuestPortParam = z
  .string()
  .regex(/^[1-9][0-9]{0,4}$/, 'must be a port number 1-65535')
  .transform(Number)
  .pipe(GuestPort);

export const PreviewAccess = z.enum(['private', 'public']);
export type PreviewAccess = z.infer<typeof PreviewAccess>;

export const PublishPortRequest = z.strictObject({
  port: GuestPort,
  name: z.string().trim().min(1).max(100).nullable().optional(),
  access: PreviewAccess.default('private'),
});
export type PublishPortRequest = z.infer<typeof PublishPortRequest>;

export const PortListQuery = PageQuery;
export type PortListQuery = z.infer<typeof PortListQuery>;

export interface Preview {
  /** `prv_<24 base-36>`; its hostname label is the same with `-` for `_`. */
  id: string;
  machine_id: string;
  port: number;
  name: string | null;
  access: PreviewAccess;
  url: string;
  /**
   * Bearer secret of a private preview: the creating answer only; null on every later read (and on an
   * answer that returned an already published port); absent for public access.
   */
  secret?: string | null;
  /** One-shot link that trades for a host-scoped cookie: the creating answer only, null otherwise. */
  access_url: string | null;
  last_request_at: string | null;
  created_at: string;
}

/** Hostname label prefix of previews. Ids carry `_`, which is not valid in a hostname. */
export const PREVIEW_LABEL_PREFIX = 'prv-';
/** The one path on a preview host the control plane keeps for itself: the access link's trade. */
export const PREVIEW_ACCESS_PATH = '/__computer/access';
/** Cookie a private preview's browser credential travels in (host-only, HttpOnly). */
export const PREVIEW_COOKIE = 'computer_preview';
