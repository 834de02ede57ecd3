/**
 * The built-in billing provider: the embedded default for self-hosted deployments. It takes no
 * money. Checkout is a one-time link on the control plane itself; following it starts the trial.
 * At the end of the trial it converts the account to `active` (there is no payment to fail).
 * Payment failures and cancellations arrive through `emit` (tests, the operator CLI) or the portal.
 */
import { newOpaqueToken } from '../auth/tokens.js';
import type { ProviderEvent } from '../domain/billing-account.js';
import type { BillingLinkRow } from '../store/repos/billing.js';
import type { Store } from '../store/store.js';
import type { BillingEventSink, BillingProvider } from './provider.js';

/** Checkout links are one-time and short-lived; portal links last an hour and may be reused within it. */
export const CHECKOUT_LINK_TTL_MS = 60 * 60 * 1000;
export const PORTAL_LINK_TTL_MS = 60 * 60 * 1000;

export interface BuiltinProvider extends BillingProvider {
  /** Redeems a checkout token: one-time; returns where to send the browser, or null. */
  completeCheckout(token: string): Promise<{ successUrl: string } | null>;
  /** The portal link's account, or null if the token is unknown or expired. */
  portalLink(token: string): Promise<BillingLinkRow | null>;
  /** Delivers a provider event, as an external provider's webhook would. */
  emit(orgId: string, event: ProviderEvent, data?: { plan_id?: string }): Promise<void>;
}

export function createBuiltinProvider(deps: { store: Store; sink: BillingEventSink; publicBaseUrl: string; now: () => Date; hash: (t: string) => string }): BuiltinProvider {
  const { store, sink, now } = deps;
  const link = async (kind: BillingLinkRow['kind'], orgId: string, planId: string | null, returnUrl: string | null, ttl: number) => {
    const { token, hash } = newOpaqueToken();
    const at = now();
    await store.billing.insertLink({
      token_hash: hash, kind, org_id: orgId, plan_id: planId, return_url: returnUrl,
      created_at: at.toISOString(), expires_at: new Date(at.getTime() + ttl).toISOString(), used_at: null,
    });
    return token;
  };
  const liveLink = async (token: string, kind: BillingLinkRow['kind']) => {
    const row = await store.billing.link(deps.hash(token), kind);
    return row && row.expires_at > now().toISOString() ? row : null;
  };
  const convertDue = async (rows: { org_id: string }[]) => {
    for (const r of rows) await sink.apply(r.org_id, 'trial.converted');
  };

  return {
    name: 'builtin',
    async createCheckout({ orgId, planId, successUrl }) {
      const token = await link('checkout', orgId, planId, successUrl, CHECKOUT_LINK_TTL_MS);
      return { url: `${deps.publicBaseUrl}/v1/billing/checkout/${token}/complete` };
    },
    async createPortal({ orgId, returnUrl }) {
      const token = await link('portal', orgId, null, returnUrl, PORTAL_LINK_TTL_MS);
      return { url: `${deps.publicBaseUrl}/v1/billing/portal/${token}` };
    },
    completeCheckout(token) {
      return store.db.tx(async () => {
        const row = await liveLink(token, 'checkout');
        if (!row || row.used_at) return null;
        if ((await store.billing.useLink(row.token_hash, now().toISOString())).changes !== 1) return null;
        await sink.apply(row.org_id, 'checkout.completed', { plan_id: row.plan_id! });
        return { successUrl: row.return_url! };
      });
    },
    portalLink: (token) => liveLink(token, 'portal'),
    emit: (orgId, event, data) => sink.apply(orgId, event, data),
    async sync(a) {
      if (a.state !== 'trialing' || !a.trial_ends_at || a.trial_ends_at > now().toISOString()) return false;
      await convertDue([a]);
      return true;
    },
    async syncAll() {
      await convertDue(await store.billing.dueTrials(now().toISOString()));
    },
  };
}
