/** Machines: the list with state and lifecycle actions, and the create form (size, template). */
import { useEffect, useState } from 'preact/hooks';
import { api, errorText } from '../api.js';
import { useDesktopUp } from '../machine-events.js';
import { usePoll } from '../poll.js';
import { onLink } from '../router.js';
import type { Machine, Page, PlanList, Template } from '../types.js';
import { LifecycleButtons } from './lifecycle.js';

export function MachinesPage() {
  const [machines, setMachines] = useState<Machine[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    try {
      setMachines((await api<Page<Machine>>('GET', '/v1/machines?limit=200')).data);
    } catch (e) {
      setError(errorText(e));
    }
  };
  usePoll(load, 3000, []);
  return (
    <section>
      <h1>Machines</h1>
      <CreateMachine onCreated={load} />
      {error && <p role="alert" class="error">{error}</p>}
      {machines === null ? (
        <p role="status">Loading…</p>
      ) : machines.length === 0 ? (
        <p>No machines yet.</p>
      ) : (
        <ul class="machines" aria-label="Machines">
          {machines.map((m) => (
            <li key={m.id} class="card">
              <div class="card-head">
                <a href={`/machines/${m.id}`} onClick={onLink} class="name">{m.name}</a>
                <span class={`state state-${m.state}`} data-state={m.state}>{m.state}</span>
              </div>
              {m.state === 'running' && <Thumb key={m.state_changed_at} machine={m} />}
              <div class="meta">{m.size} · {m.id}</div>
              <LifecycleButtons machine={m} onChange={load} />
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function CreateMachine({ onCreated }: { onCreated: () => Promise<void> }) {
  const [sizes, setSizes] = useState<string[]>(['small']);
  const [templates, setTemplates] = useState<Template[]>([]);
  const [name, setName] = useState('');
  const [size, setSize] = useState('small');
  const [template, setTemplate] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api<PlanList>('GET', '/v1/plans').then((p) => setSizes(p.sizes.map((s) => s.id)), () => {});
    api<Page<Template>>('GET', '/v1/templates?limit=200').then((p) => setTemplates(p.data.filter((t) => t.state === 'ready')), () => {});
  }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api('POST', '/v1/machines', { ...(name ? { name } : {}), ...(template ? { template } : { size }) });
      setName('');
      await onCreated();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="create" onSubmit={submit} aria-label="Create a machine">
      <label>Name<input value={name} placeholder="optional" onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} /></label>
      <label>Size
        <select value={size} disabled={!!template} onChange={(e) => setSize((e.currentTarget as HTMLSelectElement).value)}>
          {sizes.map((s) => <option key={s} value={s}>{s}</option>)}
        </select>
      </label>
      <label>Template
        <select value={template} onChange={(e) => setTemplate((e.currentTarget as HTMLSelectElement).value)}>
          <option value="">None (a fresh desktop)</option>
          {templates.map((t) => <option key={t.id} value={t.id}>{t.name}</option>)}
        </select>
      </label>
      <button type="submit" disabled={busy}>{busy ? 'Creating…' : 'Create machine'}</button>
      {error && <p role="alert" class="error">{error}</p>}
    </form>
  );
}

/**
 * A live thumbnail: a small screenshot every 10 s once the desktop is up (its `machine.ready`, from the
 * machine's events); nothing is asked while it starts, so no request fails. Keyed by the machine's
 * state_changed_at: every boot starts a new wait.
 */
function Thumb({ machine }: { machine: Machine }) {
  const up = useDesktopUp(machine);
  const [src, setSrc] = useState<string | null>(null);
  usePoll(async () => {
    if (!up) return;
    try {
      const r = await api<{ image: string; format: string }>('GET', `/v1/machines/${machine.id}/screenshot?format=jpeg&quality=50&max_side=320`);
      setSrc(`data:image/${r.format};base64,${r.image}`);
    } catch {
      /* signed out or the desktop went away meanwhile: keep the last picture */
    }
  }, 10_000, [machine.id, up]);
  return (
    <a href={`/machines/${machine.id}`} onClick={onLink} class="thumb" aria-label={`Open ${machine.name}`}>
      {src ? <img src={src} alt={`Screen of ${machine.name}`} /> : <span class="meta">desktop starting…</span>}
    </a>
  );
}
