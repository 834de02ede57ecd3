/** Ports tab: publish a port of the machine (private or public), open it, copy its URL, unpublish. */
import { useState } from 'preact/hooks';
import { api, errorText } from '../api.js';
import { usePoll } from '../poll.js';
import { CopyButton } from '../copy.js';
import type { Machine, Page, Preview } from '../types.js';

export function PortsTab({ machine }: { machine: Machine }) {
  const [ports, setPorts] = useState<Preview[]>([]);
  const [port, setPort] = useState('');
  const [name, setName] = useState('');
  const [access, setAccess] = useState('private');
  const [fresh, setFresh] = useState<Preview | null>(null);
  const [error, setError] = useState<string | null>(null);
  const base = `/v1/machines/${machine.id}/ports`;
  const load = async () => {
    try {
      setPorts((await api<Page<Preview>>('GET', `${base}?limit=200`)).data);
    } catch (e) {
      setError(errorText(e));
    }
  };
  usePoll(load, 5000, [machine.id]);
  const publish = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      setFresh(await api<Preview>('POST', base, { port: Number(port), access, ...(name ? { name } : {}) }));
      setPort('');
      setName('');
      await load();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <div class="ports">
      <form class="row" onSubmit={publish}>
        <label>Port<input type="number" min={1} max={65535} required value={port} onInput={(e) => setPort((e.currentTarget as HTMLInputElement).value)} /></label>
        <label>Label<input value={name} placeholder="optional" onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} /></label>
        <label>Access
          <select value={access} onChange={(e) => setAccess((e.currentTarget as HTMLSelectElement).value)}>
            <option value="private">private (a link with a token)</option>
            <option value="public">public (anyone with the URL)</option>
          </select>
        </label>
        <button type="submit">Publish port</button>
      </form>
      {error && <p role="alert" class="error">{error}</p>}
      {fresh && fresh.access_url && (
        <div class="secret" role="region" aria-label="New preview link">
          <p>Port {fresh.port} is published. This access link is shown once: it signs a browser in to the private preview.</p>
          <code>{fresh.access_url}</code> <CopyButton text={fresh.access_url} label="Copy access link" />{' '}
          <a href={fresh.access_url} target="_blank" rel="noopener noreferrer">Open</a>{' '}
          <button type="button" onClick={() => setFresh(null)}>Done</button>
        </div>
      )}
      <table aria-label="Published ports">
        <thead><tr><th>Port</th><th>Label</th><th>Access</th><th>URL</th><th><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>
          {ports.map((p) => (
            <tr key={p.id}>
              <td>{p.port}</td><td>{p.name ?? ''}</td><td>{p.access}</td>
              <td><a href={p.url} target="_blank" rel="noopener noreferrer" aria-label={`Open port ${p.port}`}>{p.url}</a></td>
              <td class="actions">
                <CopyButton text={p.url} label={`Copy URL of port ${p.port}`} />
                <button type="button" class="danger" aria-label={`Unpublish port ${p.port}`}
                  onClick={() => void api('DELETE', `${base}/${p.id}`).then(load, (e) => setError(errorText(e)))}>Unpublish</button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
