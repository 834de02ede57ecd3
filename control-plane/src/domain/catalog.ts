/**
 * The plan catalog: the one place that holds plans, entitlements, sizes, weights, prices and trial
 * terms. Versioned and effective-dated: an account records the version its period was priced under.
 * `null` means negotiated (enterprise), never unlimited. Prices are ILLUSTRATIVE (the spec gives none).
 */
import type { MachineSize } from '../../../shared/schemas/machine.js';

export interface SizeSpec {
  id: MachineSize;
  vcpu: number;
  memory_mb: number;
  disk_gb: number;
  /** Thousandths of a standard-hour per runtime hour. */
  weight_milli: number;
}

export interface Entitlements {
  running_machines: number | null;
  machines: number | null;
  snapshots_per_machine: number | null;
  templates: number | null;
  members: number | null;
  concurrent_sessions: number | null;
  largest_size: MachineSize | null;
  included_compute_standard_hours: number | null;
  included_hot_storage_gb: number | null;
  overage_allowed: boolean;
}

export interface PlanSpec {
  id: string;
  name: string;
  /** Decimal string in `currency`, per month; null = negotiated. */
  monthly_price: string | null;
  entitlements: Entitlements;
  /** Negotiated plans cannot be bought at checkout; they need an operator-set override. */
  self_serve: boolean;
}

export interface TrialTerms {
  days: number;
  included_compute_standard_hours: number;
  included_egress_gb: number;
  overage_allowed: boolean;
}

export interface CatalogVersion {
  version: string;
  effective_from: string;
  currency: string;
  sizes: SizeSpec[];
  /** Decimal strings in `currency`. */
  prices: {
    compute_per_standard_hour: string;
    hot_storage_per_gb_month: string;
    cold_storage_per_gb_month: string;
    egress_per_gb: string;
  };
  plans: PlanSpec[];
  trial: TrialTerms;
  /** Plans whose trial differs from `trial`. */
  trial_by_plan: Record<string, Partial<TrialTerms>>;
}

const SIZES_V1: SizeSpec[] = [
  { id: 'small', vcpu: 2, memory_mb: 4096, disk_gb: 10, weight_milli: 500 },
  { id: 'standard', vcpu: 4, memory_mb: 8192, disk_gb: 25, weight_milli: 1000 },
  { id: 'large', vcpu: 8, memory_mb: 16384, disk_gb: 50, weight_milli: 2000 },
];

export const CATALOG: readonly CatalogVersion[] = [
  {
    version: '2026-11-01',
    effective_from: '2026-11-01T00:00:00.000Z',
    currency: 'usd',
    sizes: SIZES_V1,
    prices: {
      compute_per_standard_hour: '0.12',
      hot_storage_per_gb_month: '0.10',
      cold_storage_per_gb_month: '0.03',
      egress_per_gb: '0.05',
    },
    plans: [
      {
        id: 'developer',
        name: 'Developer',
        monthly_price: '20.00',
        self_serve: true,
        entitlements: {
          running_machines: 3, machines: 5, snapshots_per_machine: 10, templates: 5, members: 5,
          concurrent_sessions: 10, largest_size: 'standard', included_compute_standard_hours: 120,
          included_hot_storage_gb: 75, overage_allowed: true,
        },
      },
      {
        id: 'pro',
        name: 'Pro',
        monthly_price: '99.00',
        self_serve: true,
        entitlements: {
          running_machines: 10, machines: 20, snapshots_per_machine: 25, templates: 25, members: 25,
          concurrent_sessions: 40, largest_size: 'large', included_compute_standard_hours: 400,
          included_hot_storage_gb: 200, overage_allowed: true,
        },
      },
      {
        id: 'startup',
        name: 'Startup',
        monthly_price: '449.00',
        self_serve: true,
        entitlements: {
          running_machines: 30, machines: 100, snapshots_per_machine: 50, templates: 100, members: 100,
          concurrent_sessions: 120, largest_size: 'large', included_compute_standard_hours: 2000,
          included_hot_storage_gb: 1024, overage_allowed: true,
        },
      },
      {
        id: 'enterprise',
        name: 'Enterprise',
        monthly_price: null,
        self_serve: false,
        entitlements: {
          running_machines: null, machines: null, snapshots_per_machine: null, templates: null, members: null,
          concurrent_sessions: null, largest_size: null, included_compute_standard_hours: null,
          included_hot_storage_gb: null, overage_allowed: true,
        },
      },
    ],
    trial: { days: 14, included_compute_standard_hours: 56, included_egress_gb: 50, overage_allowed: false },
    // The spec's "developer plan: none" for trial egress is read as: no included egress, overage allowed.
    trial_by_plan: { developer: { included_compute_standard_hours: 120, included_egress_gb: 0, overage_allowed: true } },
  },
];

/** The catalog version in effect at `at` (the newest whose effective_from is not in the future). */
export function catalogAt(at: Date, catalog: readonly CatalogVersion[] = CATALOG): CatalogVersion {
  let found: CatalogVersion | undefined;
  for (const v of catalog) if (Date.parse(v.effective_from) <= at.getTime()) {
    if (!found || Date.parse(v.effective_from) > Date.parse(found.effective_from)) found = v;
  }
  // Before the first version took effect (a clock far in the past), the oldest version applies.
  return found ?? catalog[0]!;
}

export function catalogVersion(version: string, catalog: readonly CatalogVersion[] = CATALOG): CatalogVersion | undefined {
  return catalog.find((v) => v.version === version);
}

export function findPlan(cat: CatalogVersion, planId: string): PlanSpec | undefined {
  return cat.plans.find((p) => p.id === planId);
}

export function trialTerms(cat: CatalogVersion, planId: string): TrialTerms {
  return { ...cat.trial, ...(cat.trial_by_plan[planId] ?? {}) };
}
