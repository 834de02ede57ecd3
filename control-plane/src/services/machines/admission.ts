/**
 * Admission: what is checked, inside the transaction that records a new machine or a boot, before anything
 * acts — quotas, the host's capacity and disk reserve, the plan's largest size, the name.
 *
 * The host's capacity: on a registered host (deps `hostId`, its row in `hosts`) its row is locked and the fit
 * re-checked with what the deployment has placed on it (services/placement.ts `roomOnHost`), and the new machine
 * records `host_id`; on a deployment without a registry (SQLite, or PostgreSQL before this host's driver registered)
 * the machines holding compute are counted against this process's own totals (`capacity`) and `host_id` stays null.
 */
import { randomBytes } from 'node:crypto';
import { newId, randomBase36 } from '../../../../shared/ids.js';
import type { MachineSize } from '../../../../shared/schemas/machine.js';
import { committedBy, decideCapacity } from '../../domain/capacity.js';
import { catalogAt } from '../../domain/catalog.js';
import { decide } from '../../domain/machine-lifecycle.js';
import type { MachineRow } from '../../store/repos/machines.js';
import { resourcesForSize } from '../../substrate/substrate.js';
import type { actorOf } from '../actor.js';
import { roomOnHost, type HostAdmission } from '../placement.js';
import type { MachineCore } from './core.js';
import { ERRORS } from '../../errors.js';

export const SIZE_RANK: Record<MachineSize, number> = { small: 0, standard: 1, large: 2 };

export interface Admission {
  name: string | undefined;
  size: MachineSize;
  template: string | null;
  region: string | null;
  metadata: Record<string, string>;
  start: boolean;
  /** The id of a warm pool member this create takes (warm-pool.ts); absent: a new id. */
  id?: string;
  /**
   * A fork without its own region hint: the parent's region is recorded, and not re-checked against this host
   * (placement ranked by it; a parent recorded before its deployment's hosts registered may name none).
   */
  regionFromParent?: boolean;
}

/**
 * Room on this process's host for `a`, inside the admitting transaction (after the organization's lock). Returns the
 * host the machine is recorded on: this host when it is registered, else null (a host-less deployment).
 */
async function hostRoom(c: MachineCore, a: HostAdmission): Promise<string | null> {
  const { d } = c;
  if (d.hostId && (await roomOnHost(d.store, d.hostId, a, { now: d.now(), catalog: c.catalog }))) return d.hostId;
  if (!d.capacity || (a.kind === 'new' && !a.start)) return null;
  const sizes = catalogAt(d.now(), c.catalog).sizes;
  const dec = decideCapacity(d.capacity.host, d.capacity.ratios, committedBy(await d.store.machines.computeBySize(), sizes), resourcesForSize(a.size, sizes));
  // No figures in the message: they would tell one tenant how much the others run.
  if (!dec.ok) throw ERRORS.hostFull(a.size);
  return null;
}

/**
 * Inside the transaction that records a boot (create, fork, create from a template, start, the start
 * half of restart): the organization's running_machines quota (402), then the host's capacity (503).
 * Security gate / invariant: the committed resources are counted in this same transaction, from the
 * rows in compute-holding states, so of two concurrent boots only one can take the last room (the
 * first one's row is already `creating`/`starting` when the second counts).
 */
export async function reserveCompute(c: MachineCore, orgId: string, size: MachineSize): Promise<void> {
  await c.d.quotas.check(orgId, 'running_machines');
  await hostRoom(c, { kind: 'start', size });
}

async function checkSize(c: MachineCore, orgId: string, size: MachineSize): Promise<void> {
  // After the quota checks, in their transaction: the entitlements they read (services/quotas.ts `basis`).
  const e = await c.d.quotas.entitlements(orgId);
  // Without entitlements the quota engine refuses first (subscription / no agreement).
  if (!e) return;
  const largest = e.largest_size;
  if (largest === null || SIZE_RANK[size] > SIZE_RANK[largest]) {
    throw ERRORS.sizeAbovePlan(largest ?? 'negotiated and not set', [{ field: 'size', message: `larger than the plan allows (${largest ?? 'none'})` }]);
  }
}

const generatedName = () => `machine-${randomBase36(6)}`;

/**
 * Records `m` under its given name (`given`: a name taken is a 409), or under a generated one (taken: another is
 * drawn). The check is the insert's own conflict on the live name, one statement a try.
 */
async function insertNamed(c: MachineCore, m: MachineRow, given: boolean): Promise<MachineRow> {
  for (let row = m; ; row = { ...m, name: generatedName() }) {
    if (await c.d.store.machines.insertUnlessNameTaken(row)) return row;
    if (given) throw ERRORS.machineNameTaken(row.name, [{ field: 'name', message: 'already in use' }]);
  }
}

/** Decide and record a new machine (create, fork): quotas, plan size, name, the row and machine.created. */
export async function admitInTx(c: MachineCore, orgId: string, by: ReturnType<typeof actorOf>, a: Admission, eventData: Record<string, unknown>): Promise<MachineRow> {
  const { d } = c;
  // The two counts a create checks in one statement, read once, after the organization's lock (the first check's).
  let counts: Promise<{ live: number; compute: number }> | null = null;
  const countsNow = () => (counts ??= d.store.machines.countsOf(orgId));
  await d.quotas.check(orgId, 'machines', { current: async () => (await countsNow()).live });
  d.hostHealth?.checkReserve();
  if (a.start) await d.quotas.check(orgId, 'running_machines', { current: async () => (await countsNow()).compute });
  const hostId = await hostRoom(c, { kind: 'new', size: a.size, start: a.start, region: a.regionFromParent ? null : a.region });
  await checkSize(c, orgId, a.size);
  const dec = decide(null, a.start ? 'create' : 'create_stopped');
  if (!dec.ok) throw ERRORS.createNotAllowed();
  const t = c.at();
  const m: MachineRow = {
    id: a.id ?? newId('machine'), org_id: orgId, name: a.name ?? generatedName(), size: a.size,
    template: a.template, region: a.region, metadata: JSON.stringify(a.metadata), state: dec.to,
    agent_token: randomBytes(32).toString('base64url'), created_by_kind: by.type, created_by_id: by.id,
    created_at: t, updated_at: t, state_changed_at: t, deleted_at: null,
    // Null on a host-less deployment: its only host holds it, and adopts it when it registers (docs/operations.md, "Hosts").
    host_id: hostId,
  };
  // The organization's lock (quotas.check) serializes creates; the index is the word on the name.
  const row = await insertNamed(c, m, a.name !== undefined);
  await d.events.append(orgId, row.id, 'machine.created', { to: dec.to, size: row.size, by, ...(a.template ? { template: a.template } : {}), ...eventData });
  return row;
}
