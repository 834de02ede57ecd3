/**
 * How MCP tools act: every tool call is one or more ordinary /v1 requests, dispatched in-process to the
 * same Hono app with the MCP request's own `Authorization` header. So a tool meets exactly the gates,
 * validation, lease checks, quotas, metering and error envelopes of the route it stands for, and an
 * API key's scopes apply per tool without a second permission table to keep in step.
 */
export interface V1Answer {
  status: number;
  /** The parsed JSON body (undefined for an empty body). */
  json: unknown;
}

export interface V1Caller {
  call(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, opts?: { body?: unknown; headers?: Record<string, string> }): Promise<V1Answer>;
}

/** `dispatch` is the app's own fetch; `authorization` the MCP request's header, passed through unchanged. */
export function v1Caller(base: string, authorization: string, dispatch: (req: Request) => Response | Promise<Response>): V1Caller {
  return {
    async call(method, path, opts = {}) {
      const headers: Record<string, string> = { ...opts.headers, authorization };
      let body: string | undefined;
      if (opts.body !== undefined) {
        body = JSON.stringify(opts.body);
        headers['content-type'] = 'application/json';
      }
      const res = await dispatch(new Request(new URL(path, base), { method, headers, body }));
      const text = await res.text();
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined; // every route a tool uses answers JSON; anything else is reported by status alone
      }
      return { status: res.status, json };
    },
  };
}
