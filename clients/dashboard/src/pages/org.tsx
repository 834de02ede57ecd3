/** Organization: members and roles, invitations, API keys (the secret shown once, with a copy button). */
import { useEffect, useState } from 'preact/hooks';
import { api, errorText } from '../api.js';
import { CopyButton } from '../copy.js';
import type { ApiKey, CreatedApiKey, Invitation, Me, Member, Page } from '../types.js';

const ROLES = ['member', 'admin', 'owner'] as const;
const KEY_SCOPES = ['machines:read', 'machines:write', 'machines:control', 'sessions:write'];

export function OrgPage({ me, onMembershipChange }: { me: Me; onMembershipChange: () => Promise<void> }) {
  const [members, setMembers] = useState<Member[]>([]);
  const [invites, setInvites] = useState<Invitation[]>([]);
  const [keys, setKeys] = useState<ApiKey[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [created, setCreated] = useState<CreatedApiKey | null>(null);
  const [inviteToken, setInviteToken] = useState<string | null>(null);
  const [keyName, setKeyName] = useState('');
  const [invEmail, setInvEmail] = useState('');
  const [invRole, setInvRole] = useState<string>('member');
  const can = (p: string) => me.permissions.includes(p);
  const load = async () => {
    try {
      const [m, i, k] = await Promise.all([
        api<Page<Member>>('GET', '/v1/members?limit=200'),
        api<Page<Invitation>>('GET', '/v1/invitations?limit=200'),
        api<Page<ApiKey>>('GET', '/v1/api-keys?limit=200'),
      ]);
      setMembers(m.data);
      setInvites(i.data.filter((x) => x.state === 'pending'));
      setKeys(k.data);
    } catch (e) {
      setError(errorText(e));
    }
  };
  useEffect(() => void load(), [me.organization?.id]);
  const act = async (fn: () => Promise<unknown>) => {
    setError(null);
    try {
      await fn();
      await load();
    } catch (e) {
      setError(errorText(e));
    }
  };
  return (
    <section class="org">
      <h1>{me.organization?.name ?? 'Organization'}</h1>
      {error && <p role="alert" class="error">{error}</p>}

      <h2>Members</h2>
      <table aria-label="Members">
        <thead><tr><th>Name</th><th>E-mail</th><th>Role</th><th><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>
          {members.map((m) => (
            <tr key={m.id}>
              <td>{m.name ?? ''}</td>
              <td>{m.email}</td>
              <td>
                <select aria-label={`Role of ${m.email}`} value={m.role} disabled={!can('members:manage')}
                  onChange={(e) => void act(() => api('PATCH', `/v1/members/${m.id}`, { role: (e.currentTarget as HTMLSelectElement).value }))}>
                  {ROLES.map((r) => <option key={r} value={r}>{r}</option>)}
                </select>
              </td>
              <td>{can('members:manage') && m.user_id !== me.user.id && (
                <button type="button" class="danger" aria-label={`Remove ${m.email}`} onClick={() => void act(() => api('DELETE', `/v1/members/${m.id}`))}>Remove</button>
              )}</td>
            </tr>
          ))}
        </tbody>
      </table>

      <h2>Invitations</h2>
      {can('members:manage') && (
        <form class="row" onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            const r = await api<{ token: string }>('POST', '/v1/invitations', { email: invEmail, role: invRole });
            setInviteToken(r.token);
            setInvEmail('');
          });
        }}>
          <label>E-mail to invite<input type="email" required value={invEmail} onInput={(e) => setInvEmail((e.currentTarget as HTMLInputElement).value)} /></label>
          <label>Role<select value={invRole} onChange={(e) => setInvRole((e.currentTarget as HTMLSelectElement).value)}>{ROLES.map((r) => <option key={r} value={r}>{r}</option>)}</select></label>
          <button type="submit">Invite</button>
        </form>
      )}
      {inviteToken && <p class="secret">Invitation token (shown once; send it to the invitee): <code>{inviteToken}</code></p>}
      <ul class="list" aria-label="Pending invitations">
        {invites.map((i) => (
          <li key={i.id}>{i.email} · {i.role} · expires {new Date(i.expires_at).toLocaleDateString()}{' '}
            {can('members:manage') && <button type="button" aria-label={`Revoke invitation of ${i.email}`} onClick={() => void act(() => api('DELETE', `/v1/invitations/${i.id}`))}>Revoke</button>}
          </li>
        ))}
      </ul>

      <AcceptInvitation onAccepted={onMembershipChange} />

      <h2>API keys</h2>
      {can('api_keys:manage') && (
        <form class="row" onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            setCreated(await api<CreatedApiKey>('POST', '/v1/api-keys', { name: keyName || 'dashboard key', scopes: KEY_SCOPES }));
            setKeyName('');
          });
        }}>
          <label>Key name<input value={keyName} onInput={(e) => setKeyName((e.currentTarget as HTMLInputElement).value)} /></label>
          <button type="submit">Create API key</button>
        </form>
      )}
      {created && (
        <div class="secret" role="region" aria-label="New API key">
          <p>Copy this key now: it is shown only once.</p>
          <code data-secret>{created.secret}</code>{' '}
          <CopyButton text={created.secret} label="Copy key" />{' '}
          <button type="button" onClick={() => setCreated(null)}>Done</button>
        </div>
      )}
      <table aria-label="API keys">
        <thead><tr><th>Name</th><th>Prefix</th><th>Scopes</th><th>Last used</th><th><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>
          {keys.map((k) => (
            <tr key={k.id}>
              <td>{k.name}</td><td><code>{k.prefix}…</code></td><td>{k.scopes.join(', ')}</td>
              <td>{k.last_used_at ? new Date(k.last_used_at).toLocaleString() : 'never'}</td>
              <td>{can('api_keys:manage') && <button type="button" class="danger" aria-label={`Revoke key ${k.name}`} onClick={() => void act(() => api('DELETE', `/v1/api-keys/${k.id}`))}>Revoke</button>}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** Joining another organization with an invitation token (the switcher then offers it). */
function AcceptInvitation({ onAccepted }: { onAccepted: () => Promise<void> }) {
  const [token, setToken] = useState('');
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      const r = await api<{ organization: { name: string } }>('POST', '/v1/invitations/accept', { token });
      setToken('');
      setStatus(`You joined ${r.organization.name}: switch to it with the organization menu.`);
      await onAccepted();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form class="row" onSubmit={submit}>
      <label>Invitation token<input required autocomplete="off" value={token} onInput={(e) => setToken((e.currentTarget as HTMLInputElement).value)} /></label>
      <button type="submit">Accept invitation</button>
      {status && <p role="status">{status}</p>}
      {error && <p role="alert" class="error">{error}</p>}
    </form>
  );
}
