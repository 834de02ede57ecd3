/**
 * The Stripe provider (BILLING_PROVIDER=stripe), on the official `stripe` package. Checkout is a Stripe
 * Checkout session for the plan's price (plus the metered prices), with the catalog's trial when the
 * account never subscribed; the portal is Stripe's customer portal. Stripe reports what happened through
 * the signed webhook (POST /v1/billing/stripe/webhook): subscription statuses are mapped onto the account
 * state table (domain/stripe-billing.ts), once per event id. Usage is reported as billing meter events,
 * cumulative per period, with identifiers Stripe deduplicates.
 *
 * Security: the secret key and the signing secret stay in this module's closure; no error message,
 * log line or answer carries them (Stripe's own error messages are never passed on either).
 */
import Stripe from 'stripe';
import { invalid } from '../../../shared/errors.js';
import type { BillingState } from '../../../shared/schemas/billing.js';
import type { ProviderEvent } from '../domain/billing-account.js';
import { catalogAt, trialTerms, type CatalogVersion } from '../domain/catalog.js';
import { eventsToReach, stateForSubscriptionStatus, STRIPE_METERS, stripeMeterQuantities } from '../domain/stripe-billing.js';
import { computeMilliSeconds, type Totals } from '../domain/usage-summary.js';
import type { LogSink } from '../log.js';
import type { Store } from '../store/store.js';
import type { BillingEventSink, BillingProvider } from './provider.js';
import { ERRORS } from '../errors.js';

export interface StripeSettings {
  secretKey: string;
  webhookSecret: string;
  /** plan id → the plan's recurring price id. */
  prices: Record<string, string>;
  /** Metered price ids added to every subscription. */
  meteredPrices: string[];
}

/** Where the API is (tests point it at a loopback fake); default api.stripe.com over https. */
export interface StripeClientOptions {
  host?: string;
  port?: number;
  protocol?: 'http' | 'https';
  maxNetworkRetries?: number;
}

export type WebhookOutcome = 'applied' | 'unchanged' | 'ignored' | 'stale' | 'duplicate';

export interface StripeProvider extends BillingProvider {
  /** Verifies and applies one webhook delivery. Throws 400 on a bad signature (nothing changes). */
  handleWebhook(rawBody: string, signature: string | undefined): Promise<{ id: string; outcome: WebhookOutcome }>;
  /** Reports every account's unreported usage as meter events; resolves when done (errors per account are collected). */
  reportUsage(): Promise<{ sent: number; failed: number }>;
}

export function createStripeProvider(deps: {
  store: Store;
  sink: BillingEventSink;
  settings: StripeSettings;
  now: () => Date;
  catalog: readonly CatalogVersion[];
  /** Period totals of an organization's usage records (services/usage.ts). */
  totals: (orgId: string, startMs: number, endMs: number) => Promise<Totals>;
  /** A flush of the in-memory meters before reporting. */
  flush?: () => Promise<void>;
  client?: StripeClientOptions;
  log?: LogSink;
  /** Only the server reports usage in the background (the operator CLI's billing-sync does not). */
  background?: boolean;
}): StripeProvider {
  const { store, sink, settings, now } = deps;
  const stripe = new Stripe(settings.secretKey, {
    maxNetworkRetries: deps.client?.maxNetworkRetries ?? 2,
    telemetry: false,
    timeout: 20_000,
    ...(deps.client?.host ? { host: deps.client.host } : {}),
    ...(deps.client?.port ? { port: deps.client.port } : {}),
    ...(deps.client?.protocol ? { protocol: deps.client.protocol } : {}),
  });
  const planOfPrice = new Map(Object.entries(settings.prices).map(([plan, price]) => [price, plan]));

  /** Stripe failures become a retryable 503 without Stripe's message (it can echo request parameters). */
  async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      deps.log?.({ event: 'stripe_call_failed', what, type: (e as { type?: string })?.type ?? (e as Error)?.name ?? 'Error' });
      throw ERRORS.paymentProviderUnreachable();
    }
  }

  /**
   * Links `customerId` to the organization unless it has a customer already; either way the one it has now. Two
   * links racing (concurrent first checkouts or webhooks, on PostgreSQL in two processes) end with the first one's:
   * the other's insert does nothing and it reads the winner's row.
   */
  async function linkCustomer(orgId: string, customerId: string): Promise<string> {
    await store.stripe.linkCustomer({ org_id: orgId, customer_id: customerId, subscription_id: null, last_event_created: null, created_at: now().toISOString() });
    return (await store.stripe.customer(orgId))!.customer_id;
  }

  async function customerFor(orgId: string): Promise<string> {
    const row = await store.stripe.customer(orgId);
    if (row) return row.customer_id;
    // The idempotency key makes a retried or concurrent first checkout create one customer, not two.
    const c = await call('customers.create', () => stripe.customers.create({ metadata: { org_id: orgId } }, { idempotencyKey: `computer-customer-${orgId}` }));
    return linkCustomer(orgId, c.id);
  }

  const idOf = (x: string | { id: string } | null | undefined): string | null => (x == null ? null : typeof x === 'string' ? x : x.id);

  /** Moves the account to `target` through the state table; 'unchanged' when already there, 'ignored' when no legal way. */
  async function reach(orgId: string, target: BillingState, planId: string | undefined): Promise<'applied' | 'unchanged' | 'ignored'> {
    const a = (await store.billing.account(orgId))!;
    const path = eventsToReach(a.state, target);
    if (path === null) return 'ignored';
    if (path.length === 0) return 'unchanged';
    for (const e of path) await sink.apply(orgId, e as ProviderEvent, planId ? { plan_id: planId } : {});
    return 'applied';
  }

  async function applyCheckout(ev: Stripe.CheckoutSessionCompletedEvent): Promise<{ org: string | null; outcome: WebhookOutcome }> {
    const s = ev.data.object;
    const org = s.client_reference_id ?? s.metadata?.org_id ?? null;
    if (!org || !(await store.billing.account(org)) || s.mode !== 'subscription') return { org, outcome: 'ignored' };
    const customer = idOf(s.customer);
    if (customer && (await linkCustomer(org, customer)) !== customer) return { org, outcome: 'ignored' };
    const a = (await store.billing.account(org))!;
    // The session completing is the checkout: a first subscription starts with the trial, a resubscription
    // is paid at once. If a subscription event already moved the account, this one changes nothing.
    const target: BillingState | null = a.state === 'unsubscribed' ? 'trialing' : a.state === 'canceled' ? 'active' : null;
    const sub = idOf(s.subscription);
    if (!target) return { org, outcome: 'unchanged' };
    const outcome = await reach(org, target, s.metadata?.plan_id);
    if (sub) await store.stripe.setSubscription(org, sub, ev.created);
    return { org, outcome };
  }

  async function applySubscription(ev: Stripe.CustomerSubscriptionCreatedEvent | Stripe.CustomerSubscriptionUpdatedEvent | Stripe.CustomerSubscriptionDeletedEvent): Promise<{ org: string | null; outcome: WebhookOutcome }> {
    const sub = ev.data.object;
    const customer = idOf(sub.customer);
    let row = customer ? await store.stripe.customerById(customer) : undefined;
    const org = row?.org_id ?? sub.metadata?.org_id ?? null;
    if (!org || !(await store.billing.account(org))) return { org, outcome: 'ignored' };
    if (!row && customer) {
      // Another customer's subscription claiming this org is ignored.
      if ((await linkCustomer(org, customer)) !== customer) return { org, outcome: 'ignored' };
      row = await store.stripe.customer(org);
    }
    const a = (await store.billing.account(org))!;
    const current = row?.subscription_id ?? null;
    // Events of a subscription that is not the account's (an ended one, after a resubscription) move
    // nothing, unless the account has no live subscription for it to replace.
    if (current && current !== sub.id && a.state !== 'unsubscribed' && a.state !== 'canceled') return { org, outcome: 'ignored' };
    // Stripe does not deliver in order: an event older than the last one applied for this subscription
    // carries an outdated status, so it is recorded and skipped.
    if (current === sub.id && row?.last_event_created != null && ev.created < row.last_event_created) return { org, outcome: 'stale' };
    // A canceled subscription is terminal at Stripe (a resubscription is a new subscription id): once the
    // account is canceled with this subscription, none of its later events moves it, not even an update
    // of the same second delivered after the deletion (`created` has one-second resolution).
    if (current === sub.id && a.state === 'canceled') return { org, outcome: 'ignored' };
    const target = ev.type === 'customer.subscription.deleted' ? 'canceled' : stateForSubscriptionStatus(sub.status);
    if (!target) return { org, outcome: 'ignored' };
    // A resubscription is never a trial: a canceled account's new subscription counts from `active`.
    const price = sub.items?.data?.map((i) => i.price?.id).find((p) => p && planOfPrice.has(p));
    const plan = sub.metadata?.plan_id ?? (price ? planOfPrice.get(price) : undefined);
    const outcome = await reach(org, target === 'trialing' && a.state === 'canceled' ? 'active' : target, plan);
    if (outcome === 'applied' || !current || current === sub.id) await store.stripe.setSubscription(org, sub.id, ev.created);
    return { org, outcome };
  }

  let reporting: Promise<{ sent: number; failed: number }> | null = null;

  async function reportOrg(orgId: string, customerId: string): Promise<{ sent: number; failed: number }> {
    let sent = 0;
    let failed = 0;
    const a = await store.billing.account(orgId);
    if (!a) return { sent, failed };
    const nowMs = now().getTime();
    // Periods the reporter saw open that the account has since left: report them up to where they
    // ended (the new period's start), then close them.
    const periods = new Map<string, { start: string; end: string; close: boolean }>();
    for (const r of await store.stripe.reports(orgId)) {
      if (r.closed || r.period_start === a.period_start) continue;
      const end = a.period_start && a.period_start < r.period_end ? a.period_start : r.period_end;
      periods.set(r.period_start, { start: r.period_start, end, close: true });
    }
    if (a.period_start && a.period_end) periods.set(a.period_start, { start: a.period_start, end: a.period_end, close: false });
    for (const p of periods.values()) {
      const startMs = Date.parse(p.start);
      // The hour in progress counts too: records grow in place, and what is reported is cumulative.
      const endMs = Math.min(Date.parse(p.end), nowMs + 3_600_000);
      const cat = catalogAt(new Date(startMs), deps.catalog);
      const totals = await deps.totals(orgId, startMs, endMs);
      const q = stripeMeterQuantities(computeMilliSeconds(cat, totals), totals);
      for (const meter of STRIPE_METERS) {
        await store.stripe.ensureReport(orgId, p.start, p.end, meter);
        const cumulative = Number(q[meter]);
        // First a delta left in flight (resent under its identifier), then whatever is new since.
        for (;;) {
          let row = (await store.stripe.reports(orgId)).find((r) => r.period_start === p.start && r.meter === meter)!;
          if (row.pending === null && cumulative > row.reported) {
            if ((await store.stripe.setPending(orgId, p.start, meter, row.reported, cumulative)).changes !== 1) break;
            row = { ...row, pending: cumulative };
          }
          if (row.pending === null) break;
          const pending = row.pending;
          try {
            // The identifier names the cumulative figure: resending after a crash or a lost answer is
            // deduplicated by Stripe, so a quantity is never counted twice.
            await stripe.billing.meterEvents.create({
              event_name: meter,
              identifier: `${orgId}:${Math.floor(startMs / 1000)}:${meter}:${pending}`,
              timestamp: Math.floor(nowMs / 1000),
              payload: { stripe_customer_id: customerId, value: String(pending - row.reported) },
            });
            await store.stripe.acknowledge(orgId, p.start, meter, pending);
            sent++;
          } catch (e) {
            failed++;
            deps.log?.({ event: 'stripe_meter_report_failed', org_id: orgId, meter, type: (e as { type?: string })?.type ?? 'Error' });
            break;
          }
        }
      }
      if (p.close && failed === 0) await store.stripe.closePeriod(orgId, p.start, p.end);
    }
    return { sent, failed };
  }

  return {
    name: 'stripe',
    async createCheckout({ orgId, planId, successUrl }) {
      const price = settings.prices[planId];
      if (!price) throw invalid(`The ${planId} plan is not offered on this deployment.`, [{ field: 'plan_id', message: 'no Stripe price configured for this plan' }]);
      const a = (await store.billing.account(orgId))!;
      const customer = await customerFor(orgId);
      // Only a first subscription gets the trial (the state table: unsubscribed → trialing, canceled → active).
      const trialDays = a.state === 'unsubscribed' ? trialTerms(catalogAt(now(), deps.catalog), planId).days : 0;
      const session = await call('checkout.sessions.create', () =>
        stripe.checkout.sessions.create({
          mode: 'subscription',
          customer,
          client_reference_id: orgId,
          line_items: [{ price, quantity: 1 }, ...settings.meteredPrices.map((p) => ({ price: p }))],
          success_url: successUrl,
          cancel_url: successUrl,
          metadata: { org_id: orgId, plan_id: planId },
          subscription_data: { metadata: { org_id: orgId, plan_id: planId }, ...(trialDays > 0 ? { trial_period_days: trialDays } : {}) },
        }),
      );
      if (!session.url) throw ERRORS.noCheckoutPage();
      return { url: session.url };
    },
    async createPortal({ orgId, returnUrl }) {
      const row = await store.stripe.customer(orgId);
      if (!row) throw ERRORS.noSubscriptionYet();
      const session = await call('billingPortal.sessions.create', () =>
        stripe.billingPortal.sessions.create({ customer: row.customer_id, ...(returnUrl ? { return_url: returnUrl } : {}) }),
      );
      return { url: session.url };
    },
    async handleWebhook(rawBody, signature) {
      if (!signature) throw invalid('Missing Stripe-Signature header.', [{ field: 'stripe-signature', message: 'required' }]);
      let ev: Stripe.Event;
      try {
        ev = stripe.webhooks.constructEvent(rawBody, signature, settings.webhookSecret);
      } catch {
        // Security gate: nothing in an unverified body is looked at. The reason is not echoed.
        throw invalid('Webhook signature verification failed.', [{ field: 'stripe-signature', message: 'does not verify' }]);
      }
      return store.db.tx(async () => {
        if (await store.stripe.event(ev.id)) return { id: ev.id, outcome: 'duplicate' as const };
        let r: { org: string | null; outcome: WebhookOutcome };
        switch (ev.type) {
          case 'checkout.session.completed':
            r = await applyCheckout(ev);
            break;
          case 'customer.subscription.created':
          case 'customer.subscription.updated':
          case 'customer.subscription.deleted':
            r = await applySubscription(ev);
            break;
          default:
            r = { org: null, outcome: 'ignored' };
        }
        await store.stripe.markEvent({ id: ev.id, type: ev.type, org_id: r.org, outcome: r.outcome, received_at: now().toISOString() });
        return { id: ev.id, outcome: r.outcome };
      });
    },
    reportUsage() {
      // One report at a time: two would race for the same pending rows.
      if (reporting) return reporting;
      reporting = (async () => {
        await deps.flush?.();
        let sent = 0;
        let failed = 0;
        for (const c of await store.stripe.customers()) {
          const r = await reportOrg(c.org_id, c.customer_id);
          sent += r.sent;
          failed += r.failed;
        }
        return { sent, failed };
      })().finally(() => {
        reporting = null;
      });
      return reporting;
    },
    // Stripe's webhooks move accounts (a trial ends at Stripe); nothing is due by our clock.
    async sync() {
      return false;
    },
    async syncAll() {
      if (!deps.background) return;
      void this.reportUsage().catch((e) => deps.log?.({ event: 'stripe_meter_report_failed', type: (e as Error)?.name ?? 'Error' }));
    },
  };
}
