/** Stop / start / restart / delete for one machine; the state machine on the server decides what is allowed. */
import { useState } from 'preact/hooks';
import { api, errorText } from '../api.js';
import type { Machine } from '../types.js';

export function LifecycleButtons({ machine, onChange, onDeleted }: { machine: Machine; onChange: () => void | Promise<void>; onDeleted?: () => void }) {
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const act = async (what: string, method: string, path: string) => {
    setBusy(what);
    setError(null);
    try {
      await api(method, path);
      if (what === 'delete') onDeleted?.();
      await onChange();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(null);
    }
  };
  const base = `/v1/machines/${machine.id}`;
  const s = machine.state;
  return (
    <div class="actions">
      {s === 'stopped' || s === 'error' ? (
        <button type="button" disabled={!!busy} aria-label={`Start ${machine.name}`} onClick={() => void act('start', 'POST', `${base}/start`)}>Start</button>
      ) : (
        <button type="button" disabled={!!busy || s !== 'running'} aria-label={`Stop ${machine.name}`} onClick={() => void act('stop', 'POST', `${base}/stop`)}>Stop</button>
      )}
      <button type="button" disabled={!!busy || s !== 'running'} aria-label={`Restart ${machine.name}`} onClick={() => void act('restart', 'POST', `${base}/restart`)}>Restart</button>
      <button
        type="button"
        class="danger"
        disabled={!!busy || s === 'deleting'}
        aria-label={`Delete ${machine.name}`}
        onClick={() => {
          if (confirm(`Delete ${machine.name}? Its disk is destroyed.`)) void act('delete', 'DELETE', base);
        }}
      >
        Delete
      </button>
      {busy && <span role="status">{busy}…</span>}
      {error && <span role="alert" class="error">{error}</span>}
    </div>
  );
}
