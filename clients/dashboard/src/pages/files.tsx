/** Files tab: browse directories, download a file (read in chunks), upload one (written in chunks, with progress). */
import { useEffect, useState } from 'preact/hooks';
import { api, errorText } from '../api.js';
import type { Machine } from '../types.js';

interface Entry {
  name: string;
  path: string;
  type: string;
  size: number;
}

const CHUNK = 1024 * 1024;

function toBase64(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

export function FilesTab({ machine }: { machine: Machine }) {
  const [dir, setDir] = useState('/home/agent');
  const [entries, setEntries] = useState<Entry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [progress, setProgress] = useState<string | null>(null);
  const base = `/v1/machines/${machine.id}/files`;
  const load = async (d = dir) => {
    try {
      const r = await api<{ path: string; entries: Entry[] }>('GET', `${base}?path=${encodeURIComponent(d)}`);
      setEntries([...r.entries].sort((a, b) => (a.type === b.type ? a.name.localeCompare(b.name) : a.type === 'directory' ? -1 : 1)));
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
  };
  useEffect(() => void load(dir), [dir]);

  const download = async (e: Entry) => {
    setProgress(`Downloading ${e.name}…`);
    try {
      const parts: Uint8Array[] = [];
      let offset = 0;
      for (;;) {
        const r = await api<{ content: string; length: number; eof: boolean }>(
          'GET', `${base}/content?path=${encodeURIComponent(e.path)}&encoding=base64&offset=${offset}&length=${CHUNK}`,
        );
        parts.push(Uint8Array.from(atob(r.content), (ch) => ch.charCodeAt(0)));
        offset += r.length;
        if (r.eof || r.length === 0) break;
        setProgress(`Downloading ${e.name}: ${Math.round((offset / Math.max(1, e.size)) * 100)}%`);
      }
      const url = URL.createObjectURL(new Blob(parts as BlobPart[]));
      const a = document.createElement('a');
      a.href = url;
      a.download = e.name;
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      setProgress(`Downloaded ${e.name}`);
    } catch (err) {
      setProgress(null);
      setError(errorText(err));
    }
  };

  const upload = async (ev: Event) => {
    const input = ev.currentTarget as HTMLInputElement;
    const file = input.files?.[0];
    if (!file) return;
    const target = `${dir.replace(/\/+$/, '')}/${file.name}`;
    try {
      const bytes = new Uint8Array(await file.arrayBuffer());
      let off = 0;
      do {
        const chunk = bytes.subarray(off, off + CHUNK);
        await api('PUT', `${base}/content?path=${encodeURIComponent(target)}`, { content: toBase64(chunk), encoding: 'base64', append: off > 0 });
        off += chunk.length;
        setProgress(`Uploading ${file.name}: ${Math.round((off / Math.max(1, bytes.length)) * 100)}%`);
      } while (off < bytes.length);
      setProgress(`Uploaded ${file.name}`);
      input.value = '';
      await load();
    } catch (err) {
      setProgress(null);
      setError(errorText(err));
    }
  };

  const up = dir === '/' ? null : dir.replace(/\/[^/]+\/?$/, '') || '/';
  return (
    <div class="files">
      <form class="row" onSubmit={(e) => { e.preventDefault(); void load(); }}>
        <label>Folder<input value={dir} onChange={(e) => setDir((e.currentTarget as HTMLInputElement).value)} /></label>
        {up && <button type="button" onClick={() => setDir(up)}>Up</button>}
        <label class="upload">Upload a file<input type="file" onChange={upload} /></label>
      </form>
      {progress && <p role="status" aria-label="Transfer">{progress}</p>}
      {error && <p role="alert" class="error">{error}</p>}
      <table aria-label="Files">
        <thead><tr><th>Name</th><th>Size</th><th><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>
          {(entries ?? []).map((e) => (
            <tr key={e.path}>
              <td>{e.type === 'directory' ? <button type="button" class="link" onClick={() => setDir(e.path)}>{e.name}/</button> : e.name}</td>
              <td>{e.type === 'directory' ? '' : e.size}</td>
              <td>{e.type === 'file' && <button type="button" aria-label={`Download ${e.name}`} onClick={() => void download(e)}>Download</button>}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
