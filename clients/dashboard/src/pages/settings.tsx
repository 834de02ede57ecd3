/** Settings tab: rename the machine and edit its metadata (PATCH replaces the whole map). */
import { useState } from 'preact/hooks';
import { api, errorText } from '../api.js';
import type { Machine } from '../types.js';

export function SettingsTab({ machine, onChange }: { machine: Machine; onChange: () => Promise<void> }) {
  const [name, setName] = useState(machine.name);
  const [rows, setRows] = useState<Array<[string, string]>>(Object.entries(machine.metadata));
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const save = async (body: Record<string, unknown>, what: string) => {
    setError(null);
    setStatus(null);
    try {
      await api('PATCH', `/v1/machines/${machine.id}`, body);
      setStatus(`${what} saved`);
      await onChange();
    } catch (e) {
      setError(errorText(e));
    }
  };
  const edit = (i: number, k: 0 | 1, v: string) => setRows(rows.map((r, j) => (j === i ? (k === 0 ? [v, r[1]] : [r[0], v]) : r)));
  return (
    <div class="settings">
      <form class="row" onSubmit={(e) => { e.preventDefault(); void save({ name }, 'Name'); }}>
        <label>Machine name<input required value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} /></label>
        <button type="submit">Rename</button>
      </form>
      <h2>Metadata</h2>
      <form onSubmit={(e) => { e.preventDefault(); void save({ metadata: Object.fromEntries(rows.filter(([k]) => k)) }, 'Metadata'); }}>
        {rows.map(([k, v], i) => (
          <div class="row" key={i}>
            <label>Key<input value={k} onInput={(e) => edit(i, 0, (e.currentTarget as HTMLInputElement).value)} /></label>
            <label>Value<input value={v} onInput={(e) => edit(i, 1, (e.currentTarget as HTMLInputElement).value)} /></label>
            <button type="button" aria-label={`Remove metadata ${k || i + 1}`} onClick={() => setRows(rows.filter((_, j) => j !== i))}>Remove</button>
          </div>
        ))}
        <div class="row">
          <button type="button" onClick={() => setRows([...rows, ['', '']])}>Add metadata</button>
          <button type="submit">Save metadata</button>
        </div>
      </form>
      {status && <p role="status">{status}</p>}
      {error && <p role="alert" class="error">{error}</p>}
    </div>
  );
}
