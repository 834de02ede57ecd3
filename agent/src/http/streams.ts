/**
 * Requests whose body is an open-ended byte stream (the pty attach, a TCP connect). A middleware that
 * buffers bodies (app.ts's bodyLimit reads the whole body before calling the route when there is no
 * content-length) would deadlock such a full-duplex stream, so app.ts skips those for requests matching these.
 */
export function isAttachRequest(method: string, path: string): boolean {
  return method === 'POST' && /^\/terminals\/[^/]+\/attach$/.test(path);
}

export function isTcpConnectRequest(method: string, path: string): boolean {
  return method === 'POST' && /^\/tcp\/[^/]+\/connect$/.test(path);
}
