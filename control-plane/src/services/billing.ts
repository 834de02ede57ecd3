/**
 * Billing accounts: one per organization, moved only by provider events through the state table.
 */
import { invalid } from '../../../shared/errors.js';
import { newId } from '../../../shared/ids.js';
import type { BillingState, CheckoutRequest } from '../../../shared/schemas/billing.js';
import type { BillingEventSink, BillingProvider } from '../billing/provider.js';
import { nextBillingState, type ProviderEvent } from '../domain/billing-account.js';
import { CATALOG, catalogAt, catalogVersion, findPlan, trialTerms, type CatalogVersion, type Entitlements } from '../domain/catalog.js';
import type { BillingAccountRow } from '../store/repos/billing.js';
import type { Store } from '../store/store.js';
import { ERRORS } from '../errors.js';

/** A paid period; the built-in provider bills nothing, but periods still bound usage summaries. */
export const PERIOD_MS = 30 * 24 * 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

/** A period that ended (the account as it was, and when): usage.ts closes it into a final summary. */
export type PeriodCloseListener = (old: BillingAccountRow, at: string) => Promise<void>;

export type StateChangeListener = (e: { org_id: string; from: BillingState; to: BillingState; event: ProviderEvent }) => Promise<void>;

export interface BillingDeps {
  store: Store;
  now: () => Date;
  providerName: string;
  catalog?: readonly CatalogVersion[];
  /** Origins a checkout's success_url / portal's return_url may point at (no open redirects). */
  isRecognisedOrigin: (origin: string) => boolean;
}

export function createBillingService(d: BillingDeps) {
  const { store, now } = d;
  const catalog = d.catalog ?? CATALOG;
  const listeners: StateChangeListener[] = [];
  const periodListeners: PeriodCloseListener[] = [];
  let provider: BillingProvider | null = null;

  async function account(orgId: string): Promise<BillingAccountRow> {
    const a = await store.billing.account(orgId);
    if (!a) throw ERRORS.noBillingAccount();
    return a;
  }

  const sink: BillingEventSink = {
    async apply(orgId, event, data = {}) {
      const change = await store.db.tx(async () => {
        const a = await account(orgId);
        const to = nextBillingState(a.state, event);
        if (!to) throw ERRORS.billingEventNotApplicable(event, a.state);
        const at = now();
        const next: BillingAccountRow = { ...a, state: to, updated_at: at.toISOString() };
        const newPeriod = () => {
          next.period_start = at.toISOString();
          next.period_end = new Date(at.getTime() + PERIOD_MS).toISOString();
        };
        if (event === 'checkout.completed') {
          const cat = catalogAt(at, catalog);
          const planId = data.plan_id ?? a.plan_id;
          if (!planId || !findPlan(cat, planId)) throw invalid('Checkout completed for an unknown plan.');
          next.plan_id = planId;
          next.catalog_version = cat.version;
        }
        if (to === 'trialing') {
          const ends = new Date(at.getTime() + trialTerms(catalogFor(next), next.plan_id!).days * DAY_MS);
          next.trial_ends_at = ends.toISOString();
          next.period_start = at.toISOString();
          next.period_end = ends.toISOString();
        } else {
          next.trial_ends_at = null;
          if (to === 'active' && (event !== 'payment.succeeded' || !a.period_end || a.period_end <= at.toISOString())) newPeriod();
        }
        if ((await store.billing.updateAccount(next, a.state)).changes !== 1) {
          throw ERRORS.billingAccountChanged();
        }
        await store.billing.insertEvent({ id: newId('event'), org_id: orgId, type: event, from_state: a.state, to_state: to, created_at: at.toISOString() });
        const closed = a.period_start && next.period_start !== a.period_start ? a : null;
        return { change: { org_id: orgId, from: a.state, to, event }, closed, at: at.toISOString() };
      });
      // Listeners act (stop machines, close a period) only once the move is committed: a provider call
      // wrapping this in a larger transaction (a checkout link's redemption) may still roll back.
      const notify = async () => {
        if (change.closed) for (const l of periodListeners) await l(change.closed, change.at);
        for (const l of listeners) await l(change.change);
      };
      let notified: Promise<void> | null = null;
      store.db.afterCommit(() => {
        notified = notify();
        // Inside a larger transaction nobody awaits this (it runs once that commits); the listeners' own
        // work (a period's summary, enforcement) is redone by their periodic passes if it failed.
        notified.catch(() => undefined);
      });
      // Not inside a larger transaction: the listeners ran now, and this resolves once they are done (as
      // when they were synchronous).
      if (notified) await notified;
    },
  };

  function catalogFor(a: Pick<BillingAccountRow, 'catalog_version'>): CatalogVersion {
    return (a.catalog_version && catalogVersion(a.catalog_version, catalog)) || catalogAt(now(), catalog);
  }

  /**
   * The entitlements in force for an account: an effective-dated override if one is in effect,
   * else the plan's from the catalog version the account was priced under. null when the plan is
   * negotiated and no override is in effect.
   */
  async function entitlements(a: BillingAccountRow): Promise<Entitlements | null> {
    if (!a.plan_id) return null;
    return entitlementsOf(a, (await store.billing.overrideAt(a.org_id, now().toISOString()))?.entitlements ?? null);
  }

  /** The same, given the entitlements of the override in force (null: none). */
  function entitlementsOf(a: BillingAccountRow, override: string | null): Entitlements | null {
    if (!a.plan_id) return null;
    if (override !== null) return JSON.parse(override) as Entitlements;
    const plan = findPlan(catalogFor(a), a.plan_id);
    if (!plan || !plan.self_serve) return null;
    return plan.entitlements;
  }

  function checkReturnUrl(url: string, field: string): void {
    if (!d.isRecognisedOrigin(new URL(url).origin)) {
      throw invalid(`${field} must be on a recognised origin.`, [{ field, message: 'origin is not the public base URL or an allowed origin' }]);
    }
  }

  return {
    sink,
    catalog,
    setProvider(p: BillingProvider) {
      provider = p;
    },
    get provider(): BillingProvider {
      if (!provider) throw new Error('billing provider not wired');
      return provider;
    },
    onStateChange(l: StateChangeListener) {
      listeners.push(l);
    },
    onPeriodClose(l: PeriodCloseListener) {
      periodListeners.push(l);
    },
    async open(orgId: string): Promise<void> {
      await store.billing.insertAccount({
        org_id: orgId, state: 'unsubscribed', plan_id: null, catalog_version: null, provider: d.providerName,
        trial_ends_at: null, period_start: null, period_end: null, updated_at: now().toISOString(),
      });
    },
    /** The account after letting the provider report anything due (e.g. a trial that ended): read again if it moved. */
    async account(orgId: string): Promise<BillingAccountRow> {
      const a = await account(orgId);
      return (await this.provider.sync(a)) ? account(orgId) : a;
    },
    /**
     * `account` and its `entitlements`, in one statement (the account with the override in force joined) unless the
     * provider's sync moved the account: what a quota check reads.
     */
    async accountWithEntitlements(orgId: string): Promise<{ account: BillingAccountRow; entitlements: Entitlements | null }> {
      const at = now();
      const r = await store.billing.accountWithOverride(orgId, at.toISOString());
      if (!r) throw ERRORS.noBillingAccount();
      if (await this.provider.sync(r.account)) {
        const a = await account(orgId);
        return { account: a, entitlements: await entitlements(a) };
      }
      return { account: r.account, entitlements: entitlementsOf(r.account, r.override) };
    },
    entitlements,
    catalogFor,
    async checkout(orgId: string, req: CheckoutRequest): Promise<{ url: string }> {
      const cat = catalogAt(now(), catalog);
      const plan = findPlan(cat, req.plan_id);
      if (!plan) throw invalid('Unknown plan.', [{ field: 'plan_id', message: 'no such plan in the current catalog' }]);
      checkReturnUrl(req.success_url, 'success_url');
      const a = await this.account(orgId);
      if (a.state !== 'unsubscribed' && a.state !== 'canceled') {
        throw ERRORS.changeInBillingPortal(a.state);
      }
      // A negotiated plan cannot be bought: it needs an agreement (an operator-set override) in effect first.
      if (!plan.self_serve && !(await store.billing.overrideAt(orgId, now().toISOString()))) {
        throw ERRORS.planNeedsAgreement(plan.id);
      }
      return this.provider.createCheckout({ orgId, planId: plan.id, successUrl: req.success_url });
    },
    async portal(orgId: string, returnUrl: string | null): Promise<{ url: string }> {
      if (returnUrl) checkReturnUrl(returnUrl, 'return_url');
      await account(orgId);
      return this.provider.createPortal({ orgId, returnUrl });
    },
    /** Operator action: an effective-dated agreement (enterprise, or a negotiated raise on any plan). */
    async setOverride(orgId: string, e: Entitlements, from: Date, until: Date | null): Promise<string> {
      const id = newId('event');
      await store.billing.insertOverride({
        id, org_id: orgId, entitlements: JSON.stringify(e), effective_from: from.toISOString(),
        effective_until: until ? until.toISOString() : null, created_at: now().toISOString(),
      });
      return id;
    },
    events: (orgId: string) => store.billing.events(orgId),
  };
}
export type BillingService = ReturnType<typeof createBillingService>;
