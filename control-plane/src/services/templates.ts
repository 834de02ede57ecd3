/**
 * Templates: a named starting point for new machines. From a snapshot (the template pins the snapshot's layer
 * itself, so deleting the snapshot leaves it working), from a machine (captured now as a snapshot of origin
 * `template`, whose layer the template pins too), or from a size alone (the base image, no captured disk).
 * `building` until the disk is held, then `ready` (or `error`). Deleting a template leaves the machines made
 * from it: their disks reference the layer, not the template.
 */
import { newId } from '../../../shared/ids.js';
import type { MachineSize } from '../../../shared/schemas/machine.js';
import type { Page } from '../../../shared/schemas/pagination.js';
import type { CreateTemplateRequest, Template, TemplateListQuery } from '../../../shared/schemas/template.js';
import type { OrgPrincipal } from '../context.js';
import { decideTemplate } from '../domain/snapshot-lifecycle.js';
import { pageOf } from '../store/pagination.js';
import type { SnapshotRow, TemplateRow } from '../store/repos/snapshots.js';
import type { Store } from '../store/store.js';
import type { DiskSource, Layers } from '../substrate/substrate.js';
import { actorOf } from './actor.js';
import type { QuotaService } from './quotas.js';
import type { SnapshotService } from './snapshots.js';
import { ERRORS } from '../errors.js';

export function templateView(r: TemplateRow): Template {
  return {
    id: r.id, name: r.name, state: r.state, source: r.source, size: r.size, snapshot_id: r.snapshot_id, machine_id: r.machine_id,
    size_bytes: r.size_bytes, created_at: r.created_at, completed_at: r.completed_at,
  };
}

export interface TemplateServiceDeps {
  store: Store;
  /** Only layer pins: a template shares its snapshot's layer. */
  substrate: Layers;
  quotas: QuotaService;
  snapshots: SnapshotService;
  now: () => Date;
  onFailure?: (id: string, op: string, cause: unknown) => void;
  /** This process's host: where a template's pin is taken (its `host_id`; null: no registry). */
  hostId?: string | null;
}

export function createTemplateService(d: TemplateServiceDeps) {
  const { store, substrate, snapshots } = d;
  const at = () => d.now().toISOString();

  async function load(orgId: string, id: string): Promise<TemplateRow> {
    const t = await store.templates.inOrg(orgId, id);
    if (!t) throw ERRORS.noSuchTemplate();
    return t;
  }

  /** The size a snapshot's machine had (the machine may be deleted: its row stays). */
  async function sizeOfMachine(machineId: string): Promise<MachineSize> {
    return (await store.machines.anyById(machineId))?.size ?? 'small';
  }

  /** Record the outcome of a build by compare-and-set on `building`. */
  async function settle(t: TemplateRow, f: { snapshot_id: string | null; layer_id: string | null; size_bytes: number | null } | null): Promise<TemplateRow> {
    if (f && decideTemplate(t.state, 'built')) await store.templates.settleReady(t.id, f, at());
    else if (!f && decideTemplate(t.state, 'build_failed')) await store.templates.settleError(t.id, at());
    return (await store.templates.byId(t.id)) ?? t;
  }

  async function pinSnapshot(t: TemplateRow, s: SnapshotRow & { layer_id: string }): Promise<TemplateRow> {
    try {
      await snapshots.holding(t.id, () => substrate.pinLayer(s.layer_id, t.id));
    } catch (e) {
      // The snapshot was deleted (its layer freed) between the decision and the pin.
      d.onFailure?.(t.id, 'template_pin', e);
      return settle(t, null);
    }
    const out = await settle(t, { snapshot_id: s.id, layer_id: s.layer_id, size_bytes: s.size_bytes });
    if (out.state !== 'ready') await substrate.releaseLayer(s.layer_id, t.id).catch(() => {});
    return out;
  }

  return {
    get: async (orgId: string, id: string): Promise<Template> => templateView(await load(orgId, id)),

    list(orgId: string, q: TemplateListQuery): Promise<Page<Template>> {
      return pageOf(q, (after, limit) => store.templates.page(orgId, after, limit), templateView);
    },

    async create(p: OrgPrincipal, req: CreateTemplateRequest, wait: boolean): Promise<{ template: Template; settled: boolean }> {
      const orgId = p.org_id;
      const by = actorOf(p);
      // The template's pin is taken on this host: a snapshot held on another is brought here first.
      if (req.snapshot_id !== undefined) await snapshots.bringReady(orgId, req.snapshot_id, null);
      const plan = await store.db.tx(async () => {
        await d.quotas.check(orgId, 'templates');
        const state = decideTemplate(null, 'create');
        if (!state) throw ERRORS.templateTableRefusesCreate();
        const t: TemplateRow = {
          id: newId('template'), org_id: orgId, name: req.name, state, source: 'image', size: req.size ?? 'small',
          snapshot_id: null, machine_id: null, layer_id: null, size_bytes: null, created_at: at(), completed_at: null,
          host_id: req.snapshot_id !== undefined || req.machine_id !== undefined ? (d.hostId ?? null) : null,
        };
        let snap: (SnapshotRow & { layer_id: string }) | null = null;
        let capture: SnapshotRow | null = null;
        if (req.snapshot_id !== undefined) {
          snap = await snapshots.readyInTx(orgId, req.snapshot_id);
          t.source = 'snapshot';
          t.size = await sizeOfMachine(snap.machine_id);
          t.machine_id = snap.machine_id;
        } else if (req.machine_id !== undefined) {
          const m = await store.machines.inOrg(orgId, req.machine_id);
          if (!m) throw ERRORS.noSuchMachine([{ field: 'machine_id', message: 'no such machine' }]);
          t.source = 'machine';
          t.size = m.size;
          t.machine_id = m.id;
          capture = await snapshots.beginInTx(m, 'template', `Template ${req.name}`, by, { admit: 'quota' });
          t.snapshot_id = capture.id;
        }
        await store.templates.insert(t);
        if (t.source === 'image') await store.templates.settleReady(t.id, { snapshot_id: null, layer_id: null, size_bytes: null }, t.created_at);
        return { t, snap, capture };
      });
      const { t, snap, capture } = plan;
      let done: Promise<TemplateRow>;
      if (snap) done = pinSnapshot(t, snap);
      else if (capture) {
        done = snapshots.holding(t.id, async () => {
          const s = await snapshots.capture(capture);
          return s.state === 'ready' && s.layer_id ? pinSnapshot(t, { ...s, layer_id: s.layer_id }) : settle(t, null);
        });
      } else done = store.templates.byId(t.id).then((r) => r ?? t);
      if (!wait) {
        done.catch(() => {});
        return { template: templateView((await store.templates.byId(t.id)) ?? t), settled: t.source === 'image' };
      }
      const out = await done;
      if (out.state === 'error') {
        throw ERRORS.templateBuildFailed(out.id);
      }
      return { template: templateView(out), settled: true };
    },

    /** Deleting a template leaves its machines: their disks reference the layer, not the template. */
    async remove(p: OrgPrincipal, id: string): Promise<void> {
      const t = await store.db.tx(async () => {
        const t = await load(p.org_id, id);
        if (t.state === 'building') throw ERRORS.templateBuilding(t.id);
        await store.templates.remove(t.id);
        return t;
      });
      // A release that fails here is redone by the reconciler (the pin's holder no longer exists).
      if (t.layer_id) await substrate.releaseLayer(t.layer_id, t.id).catch((e) => d.onFailure?.(t.id, 'template_delete', e));
    },

    /**
     * Before a create from `templateId` is admitted: its layer, when another host holds it, brought here and pinned
     * by the template's id (used on every host: copied on first use there, then cached until the template is gone).
     */
    async bring(orgId: string, templateId: string): Promise<void> {
      const t = await store.templates.inOrg(orgId, templateId);
      if (t?.state === 'ready' && t.layer_id) await snapshots.bring({ layerId: t.layer_id, hostId: t.host_id }, t.id);
    },

    /** What a machine created from `templateId` starts from: its disk (or the base image) and size. */
    async sourceInTx(orgId: string, templateId: string): Promise<{ template: TemplateRow; source: DiskSource }> {
      const t = await store.templates.inOrg(orgId, templateId);
      if (!t) throw ERRORS.noSuchTemplate([{ field: 'template', message: 'no such template' }]);
      if (t.state !== 'ready') throw ERRORS.templateNotReady(t.id, t.state);
      return { template: t, source: t.layer_id ? { kind: 'layer', layerId: t.layer_id } : { kind: 'base' } };
    },
  };
}
export type TemplateService = ReturnType<typeof createTemplateService>;
