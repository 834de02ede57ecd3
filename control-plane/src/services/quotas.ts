/**
 * The quota engine every create/start path calls. Counts come from the callers (or from counters
 * registered by the module that owns the resource); the decision is domain/quotas.ts.
 */
import { AppError } from '../../../shared/errors.js';
import { COUNTED_LIMIT_KEYS, decideQuota, decideSubscription, shownLimit, type CountedLimitKey, type QuotaDecision } from '../domain/quotas.js';
import type { Entitlements } from '../domain/catalog.js';
import { TxMemo, type Db } from '../store/db.js';
import type { BillingAccountRow } from '../store/repos/billing.js';
import type { BillingService } from './billing.js';
import { ERRORS } from '../errors.js';

export type Counter = (orgId: string) => Promise<number>;
/** What a quota check decides on: the organization's billing account and the entitlements in force. */
export interface QuotaBasis {
  account: BillingAccountRow;
  entitlements: Entitlements | null;
}
/** A further refusal of `key` beyond its count (a used-up trial), given the check's basis: rendered as `subscription` 402. */
export type Gate = (orgId: string, basis: QuotaBasis) => Promise<{ current: number; maximum: number; message: string } | null>;

const BASIS = new TxMemo<QuotaBasis>();

export function createQuotaService(d: {
  billing: BillingService;
  upgradeUrl: string | null;
  counters: Partial<Record<CountedLimitKey, Counter>>;
  /**
   * Serializes the organization's counting transactions until the caller's transaction ends (the store's
   * `identity.lockOrg`: a row lock on PostgreSQL, nothing on SQLite whose write transactions are serialized whole).
   */
  lockOrg: (orgId: string) => Promise<void>;
  /** The store's `db.once`: the basis below read once per transaction. */
  once: Db['once'];
}) {
  /**
   * The organization locked, then its billing account and entitlements: once per transaction (a create checks two
   * quotas and the plan's largest size in one, and the lock held makes the first read the transaction's answer).
   */
  const basis = (orgId: string): Promise<QuotaBasis> =>
    d.once(BASIS, orgId, async () => {
      await d.lockOrg(orgId);
      return d.billing.accountWithEntitlements(orgId);
    });
  const counters = { ...d.counters };
  const gates: Partial<Record<CountedLimitKey, Gate>> = {};
  const count = async (orgId: string, key: CountedLimitKey): Promise<number> => {
    const c = counters[key];
    // A resource whose module has not registered a counter does not exist yet: there are none.
    return c ? c(orgId) : 0;
  };
  /** A refusal as the spec's 402; the message is for people, clients render `quota`. */
  const refuse = (state: string, plan: string | null, decision: QuotaDecision & { ok: false }): AppError => {
    const message =
      decision.reason === 'subscription'
        ? `The organization's billing account is ${state}; subscribe to create or start anything.`
        : decision.reason === 'no_agreement'
          ? `The ${plan} plan is negotiated and no agreement is in effect.`
          : `The plan allows ${decision.quota.maximum ?? 'a negotiated number of'} ${decision.quota.limit.replaceAll('_', ' ')}; ${decision.quota.current} in use.`;
    return ERRORS.quotaExceeded(message, decision.quota);
  };
  return {
    /** Lets the module owning a resource (machines, templates, sessions…) supply its count. */
    registerCounter(key: CountedLimitKey, c: Counter) {
      counters[key] = c;
    },
    registerGate(key: CountedLimitKey, g: Gate) {
      gates[key] = g;
    },
    /**
     * Throws 402 quota_exceeded (with the `quota` object) unless `adding` more of `key` fit.
     * `current` overrides the registered counter (e.g. snapshots of one machine).
     *
     * Call it inside the transaction that then records the new thing, before anything of the count is read: it takes
     * the organization's lock first, then counts (issue 24 item 2). So of two processes admitting at once on
     * PostgreSQL the second counts only after the first committed its row, and a quota is exact across processes.
     * That is why a counted `current` is given as a function: it is read after the lock, never before.
     */
    async check(orgId: string, key: CountedLimitKey, opts: { adding?: number; current?: number | (() => Promise<number>) } = {}): Promise<void> {
      const { account: a, entitlements } = await basis(orgId);
      const decision = decideQuota({
        state: a.state,
        plan_id: a.plan_id,
        entitlements,
        key,
        current: typeof opts.current === 'function' ? await opts.current() : opts.current ?? (await count(orgId, key)),
        adding: opts.adding ?? 1,
        upgrade_url: d.upgradeUrl,
      });
      if (decision.ok) {
        const refused = (await gates[key]?.(orgId, { account: a, entitlements })) ?? null;
        if (refused) {
          throw ERRORS.quotaExceeded(refused.message, { limit: 'subscription', current: refused.current, maximum: refused.maximum, plan_id: a.plan_id ?? 'none', upgrade_url: d.upgradeUrl });
        }
        return;
      }
      throw refuse(a.state, a.plan_id, decision);
    },
    /** The organization's entitlements in force, from the same per-transaction basis as `check` (null: none). */
    async entitlements(orgId: string): Promise<Entitlements | null> {
      return (await basis(orgId)).entitlements;
    },
    /**
     * Throws 402 quota_exceeded with `quota.limit` `subscription` unless the account may create or start
     * anything: for the creating writes no entitlement counts (docs/api-auth-and-billing.md, "Creating and
     * starting").
     */
    async checkSubscription(orgId: string): Promise<void> {
      const a = await d.billing.account(orgId);
      const decision = decideSubscription({ state: a.state, plan_id: a.plan_id, entitlements: await d.billing.entitlements(a), upgrade_url: d.upgradeUrl });
      if (!decision.ok) throw refuse(a.state, a.plan_id, decision);
    },
    /** `limits` of GET /v1/billing: the six counted keys with current use and the limit in force. */
    async limits(orgId: string) {
      const a = await d.billing.account(orgId);
      const e = await d.billing.entitlements(a);
      const out = [];
      for (const key of COUNTED_LIMIT_KEYS) out.push({ key, current: await count(orgId, key), limit: shownLimit(a.state, e, key) });
      return out;
    },
  };
}
export type QuotaService = ReturnType<typeof createQuotaService>;
