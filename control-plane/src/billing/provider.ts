/**
 * The seam between the control plane and whoever takes payment. A provider creates checkout and
 * portal links and reports what happened through `BillingEventSink`; only the sink moves an account.
 */
import type { ProviderEvent } from '../domain/billing-account.js';
import type { BillingAccountRow } from '../store/repos/billing.js';

export interface BillingEventSink {
  /** Applies one provider event through the account state table (409 conflict on an illegal move). */
  apply(orgId: string, event: ProviderEvent, data?: { plan_id?: string }): Promise<void>;
}

export interface BillingProvider {
  readonly name: string;
  createCheckout(req: { orgId: string; planId: string; successUrl: string }): Promise<{ url: string }>;
  createPortal(req: { orgId: string; returnUrl: string | null }): Promise<{ url: string }>;
  /**
   * Lets the provider report what its clock says is due for the account `a` (as just read; e.g. a trial ending).
   * True when that moved the account (the caller reads it again); false: `a` stands.
   */
  sync(a: BillingAccountRow): Promise<boolean>;
  /** Same, for every account; run periodically by main.ts. */
  syncAll(): Promise<void>;
}
