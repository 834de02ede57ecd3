/** One machine: header with lifecycle actions and tabs (screen, terminal, files, snapshots, events). */
import { useState } from 'preact/hooks';
import { api, errorText } from '../api.js';
import { usePoll } from '../poll.js';
import { navigate, onLink } from '../router.js';
import type { Machine, Me } from '../types.js';
import { EventsTab } from './events.js';
import { FilesTab } from './files.js';
import { LifecycleButtons } from './lifecycle.js';
import { PortsTab } from './ports.js';
import { Screen } from './screen.js';
import { SecretsTab } from './secrets.js';
import { SettingsTab } from './settings.js';
import { SnapshotsTab } from './snapshots.js';
import { TerminalTab } from './terminal.js';

const TABS = [
  ['screen', 'Screen'],
  ['terminal', 'Terminal'],
  ['files', 'Files'],
  ['snapshots', 'Snapshots'],
  ['ports', 'Ports'],
  ['secrets', 'Secrets'],
  ['events', 'Events'],
  ['settings', 'Settings'],
] as const;

export function MachinePage({ id, tab }: { id: string; tab: string; me: Me }) {
  const [machine, setMachine] = useState<Machine | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    try {
      setMachine(await api<Machine>('GET', `/v1/machines/${id}`));
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
  };
  usePoll(load, 3000, [id]);
  if (!machine) return error ? <p role="alert" class="error">{error}</p> : <p role="status">Loading…</p>;
  const running = machine.state === 'running';
  return (
    <section class="machine">
      <div class="machine-head">
        <h1>{machine.name}</h1>
        <span class={`state state-${machine.state}`} data-state={machine.state}>{machine.state}</span>
        <span class="meta">{machine.size} · {machine.id}</span>
        <LifecycleButtons machine={machine} onChange={load} onDeleted={() => navigate('/')} />
      </div>
      <nav class="tabs" aria-label="Machine">
        {TABS.map(([t, label]) => (
          <a key={t} href={`/machines/${id}/${t}`} onClick={onLink} aria-current={tab === t ? 'page' : undefined}>{label}</a>
        ))}
      </nav>
      {tab === 'screen' && <Screen machine={machine} />}
      {tab === 'terminal' && (running ? <TerminalTab machine={machine} /> : <p>The machine is {machine.state}: start it to open a terminal.</p>)}
      {tab === 'files' && (running ? <FilesTab machine={machine} /> : <p>The machine is {machine.state}: start it to browse its files.</p>)}
      {tab === 'snapshots' && <SnapshotsTab machine={machine} onChange={load} />}
      {tab === 'ports' && <PortsTab machine={machine} />}
      {tab === 'secrets' && <SecretsTab machine={machine} />}
      {tab === 'events' && <EventsTab machine={machine} />}
      {tab === 'settings' && <SettingsTab machine={machine} onChange={load} />}
    </section>
  );
}
