/** Snapshots tab: create, restore, fork, delete. */
import { useState } from 'preact/hooks';
import { api, errorText } from '../api.js';
import { usePoll } from '../poll.js';
import { navigate } from '../router.js';
import type { Machine, Page, Snapshot } from '../types.js';

export function SnapshotsTab({ machine, onChange }: { machine: Machine; onChange: () => Promise<void> }) {
  const [snaps, setSnaps] = useState<Snapshot[] | null>(null);
  const [name, setName] = useState('');
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    try {
      setSnaps((await api<Page<Snapshot>>('GET', `/v1/snapshots?machine_id=${machine.id}&limit=200`)).data);
    } catch (e) {
      setError(errorText(e));
    }
  };
  usePoll(load, 3000, [machine.id]);
  const act = async (what: string, fn: () => Promise<unknown>) => {
    setBusy(what);
    setError(null);
    try {
      await fn();
      await load();
      await onChange();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(null);
    }
  };
  return (
    <div class="snapshots">
      <form class="row" onSubmit={(e) => {
        e.preventDefault();
        void act('snapshot', () => api('POST', '/v1/snapshots', { machine_id: machine.id, ...(name ? { name } : {}) }).then(() => setName('')));
      }}>
        <label>Snapshot name<input value={name} placeholder="optional" onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} /></label>
        <button type="submit" disabled={!!busy}>Create snapshot</button>
      </form>
      {busy && <p role="status">{busy}…</p>}
      {error && <p role="alert" class="error">{error}</p>}
      <ul class="list" aria-label="Snapshots">
        {(snaps ?? []).map((s) => (
          <li key={s.id}>
            <span class="name">{s.name ?? s.id}</span> <span class={`state state-${s.state}`} data-state={s.state}>{s.state}</span>{' '}
            <span class="meta">{new Date(s.created_at).toLocaleString()}</span>
            <span class="actions">
              <button type="button" disabled={!!busy || s.state !== 'ready'} aria-label={`Restore ${s.name ?? s.id}`}
                onClick={() => confirm('Restore this snapshot? The current disk is kept as "Before restore".') && void act('restore', () => api('POST', `/v1/machines/${machine.id}/restore`, { snapshot_id: s.id }))}>Restore</button>
              <button type="button" disabled={!!busy || s.state !== 'ready'} aria-label={`Fork ${s.name ?? s.id}`}
                onClick={() => void act('fork', async () => navigate(`/machines/${(await api<Machine>('POST', `/v1/machines/${machine.id}/fork`, { snapshot_id: s.id })).id}`))}>Fork</button>
              <button type="button" class="danger" disabled={!!busy || s.state === 'pending'} aria-label={`Delete ${s.name ?? s.id}`}
                onClick={() => void act('delete', () => api('DELETE', `/v1/snapshots/${s.id}`))}>Delete</button>
            </span>
          </li>
        ))}
      </ul>
    </div>
  );
}
