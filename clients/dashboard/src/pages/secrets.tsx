/** Secrets tab: set (write-only: values are never shown or read back) and revoke a machine's secrets. */
import { useState } from 'preact/hooks';
import { api, errorText } from '../api.js';
import { usePoll } from '../poll.js';
import type { Machine, Secret } from '../types.js';

export function SecretsTab({ machine }: { machine: Machine }) {
  const [secrets, setSecrets] = useState<Secret[]>([]);
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const [error, setError] = useState<string | null>(null);
  const base = `/v1/machines/${machine.id}/secrets`;
  const load = async () => {
    try {
      setSecrets((await api<{ data: Secret[] }>('GET', base)).data);
    } catch (e) {
      setError(errorText(e));
    }
  };
  usePoll(load, 5000, [machine.id]);
  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      await api('PUT', base, { name, value });
      setName('');
      // The value leaves the page as soon as it is stored.
      setValue('');
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <div class="secrets">
      <p>Secrets are written to the machine's <code>/run/computer/secrets.env</code> (tmpfs) and can be typed with <code>keyboard/type {'{secret}'}</code>. Values are never shown again.</p>
      <form class="row" onSubmit={save}>
        <label>Secret name<input required pattern="[A-Z_][A-Z0-9_]*" placeholder="API_TOKEN" value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} /></label>
        <label>Value<input type="password" autocomplete="off" required value={value} onInput={(e) => setValue((e.currentTarget as HTMLInputElement).value)} /></label>
        <button type="submit">Set secret</button>
      </form>
      {error && <p role="alert" class="error">{error}</p>}
      <table aria-label="Secrets">
        <thead><tr><th>Name</th><th>Version</th><th>Delivered</th><th>Updated</th><th><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>
          {secrets.map((s) => (
            <tr key={s.name}>
              <td><code>{s.name}</code></td><td>{s.version}</td>
              <td>{s.delivered_at ? new Date(s.delivered_at).toLocaleString() : 'pending'}</td>
              <td>{new Date(s.updated_at).toLocaleString()}</td>
              <td><button type="button" class="danger" aria-label={`Revoke ${s.name}`}
                onClick={() => void api('DELETE', `${base}/${encodeURIComponent(s.name)}`).then(load, (e) => setError(errorText(e)))}>Revoke</button></td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
