/**
 * A local stand-in for the Stripe HTTP API: a real node:http server on loopback that the `stripe`
 * package talks to through its host/port/protocol options. It records every request (method, path,
 * form-decoded body, idempotency key, the Authorization header) and answers the few objects the
 * provider needs with minimal JSON. `failNext(path)` makes the next call to a path answer 500.
 * Meter events are deduplicated on `identifier`, as Stripe does.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StripeRequest {
  method: string;
  path: string;
  body: Record<string, string>;
  idempotencyKey: string | null;
  authorization: string | null;
}

export async function startFakeStripe() {
  const requests: StripeRequest[] = [];
  const failing = new Map<string, number>();
  const meterIdentifiers = new Set<string>();
  let n = 0;
  const server = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (raw += c));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]!;
      const body = Object.fromEntries(new URLSearchParams(raw));
      requests.push({
        method: req.method ?? '', path, body,
        idempotencyKey: (req.headers['idempotency-key'] as string | undefined) ?? null,
        authorization: req.headers.authorization ?? null,
      });
      const answer = (status: number, json: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_fake${++n}` }).end(JSON.stringify(json));
      };
      const fails = failing.get(path) ?? 0;
      if (fails > 0) {
        failing.set(path, fails - 1);
        return answer(500, { error: { type: 'api_error', message: 'fake outage' } });
      }
      if (req.method === 'POST' && path === '/v1/customers') return answer(200, { id: `cus_fake${++n}`, object: 'customer', metadata: {} });
      if (req.method === 'POST' && path === '/v1/checkout/sessions') {
        const id = `cs_test_fake${++n}`;
        return answer(200, { id, object: 'checkout.session', mode: body.mode, url: `https://checkout.stripe.test/c/pay/${id}` });
      }
      if (req.method === 'POST' && path === '/v1/billing_portal/sessions') {
        return answer(200, { id: `bps_fake${++n}`, object: 'billing_portal.session', customer: body.customer, url: `https://billing.stripe.test/p/session/fake${n}` });
      }
      if (req.method === 'POST' && path === '/v1/billing/meter_events') {
        meterIdentifiers.add(body.identifier ?? '');
        return answer(200, { object: 'billing.meter_event', event_name: body.event_name, identifier: body.identifier, payload: {}, timestamp: Number(body.timestamp), created: Number(body.timestamp), livemode: false });
      }
      return answer(404, { error: { type: 'invalid_request_error', message: `fake: no route ${req.method} ${path}` } });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    client: { host: '127.0.0.1', port, protocol: 'http' as const, maxNetworkRetries: 0 },
    requests,
    /** Meter event identifiers received (a set: what Stripe would count once). */
    meterIdentifiers,
    failNext(path: string, times = 1) {
      failing.set(path, times);
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
export type FakeStripe = Awaited<ReturnType<typeof startFakeStripe>>;
