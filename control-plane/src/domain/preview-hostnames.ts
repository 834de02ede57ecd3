/**
 * Preview hostnames (pure). A preview `prv_<24 base-36>` answers on `prv-<24 base-36>.<domain>`: ids carry
 * `_`, which is not valid in a hostname, and `-` never occurs in the id's random part, so the mapping is
 * one to one. Any other host on the listener is the API's.
 */
import { ID_PREFIX } from '../../../shared/ids.js';
import { PREVIEW_LABEL_PREFIX } from '../../../shared/schemas/ports.js';

const LABEL_RE = new RegExp(`^${PREVIEW_LABEL_PREFIX}([0-9a-z]{20,32})$`);

function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * The domain previews are served under, or null when previews are off: PREVIEW_DOMAIN as given
 * (`off` turns them off); unset, `localhost` when the API is both served and reached on loopback (browsers
 * and curl resolve `*.localhost` to loopback themselves), else off: a public listener, or a public URL in
 * front of a loopback one (a TLS terminator), needs a real wildcard name, and a `prv-….localhost` URL
 * handed out there would lead nowhere.
 */
export function previewDomainOf(cfg: { previewDomain: string | null; host: string; publicBaseUrl: string }): string | null {
  const d = cfg.previewDomain?.trim().toLowerCase().replace(/^\.+|\.+$/g, '');
  if (d === 'off') return null;
  if (d) return d;
  return isLoopbackHost(cfg.host) && isLoopbackHost(new URL(cfg.publicBaseUrl).hostname) ? 'localhost' : null;
}

export function previewLabel(previewId: string): string {
  return previewId.replace(`${ID_PREFIX.preview}_`, PREVIEW_LABEL_PREFIX);
}

/** The preview id a Host header names under `domain`, or null when the host is not a preview host. */
export function previewIdFromHost(hostHeader: string | undefined, domain: string | null): string | null {
  if (!hostHeader || !domain) return null;
  // Strip the port; a trailing dot (absolute name) means the same host.
  const host = hostHeader.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
  if (!host.endsWith(`.${domain}`)) return null;
  const m = LABEL_RE.exec(host.slice(0, -(domain.length + 1)));
  return m ? `${ID_PREFIX.preview}_${m[1]}` : null;
}

/** Is this Host one of the preview hostnames (well formed or not: a bad label is a 404 page, not the API)? */
export function isPreviewHost(hostHeader: string | undefined, domain: string | null): boolean {
  if (!hostHeader || !domain) return false;
  const host = hostHeader.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
  if (!host.endsWith(`.${domain}`)) return false;
  const label = host.slice(0, -(domain.length + 1));
  return !label.includes('.') && label.startsWith(PREVIEW_LABEL_PREFIX);
}

/**
 * The preview's origin: the public base URL's scheme and port (the TLS terminator's, when there is one)
 * with the preview's hostname.
 */
export function previewOrigin(previewId: string, domain: string, publicBaseUrl: string): string {
  const base = new URL(publicBaseUrl);
  return `${base.protocol}//${previewLabel(previewId)}.${domain}${base.port ? `:${base.port}` : ''}`;
}
