/**
 * Connection-specific header fields (pure): what a proxy never passes on, for both of this service's proxies (the
 * preview proxy towards a guest, and the internal forward between control-plane processes).
 */

/** RFC 9110 §7.6.1 connection-specific fields, plus ones a proxy must not pass on. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'expect', 'http2-settings',
]);

/** The fields a flat [name, value, …] header list's Connection header names (hop-by-hop too, RFC 9110 §7.6.1), lower-cased. */
export function namedByConnection(raw: readonly string[]): Set<string> {
  const named = new Set<string>();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') for (const t of raw[i + 1]!.split(',')) named.add(t.trim().toLowerCase());
  }
  return named;
}
