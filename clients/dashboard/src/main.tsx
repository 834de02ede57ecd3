/** The dashboard's entry: who is signed in, the shell (navigation, organization switcher) and the pages. */
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import '@xterm/xterm/css/xterm.css';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { api, ApiError, beginSignedIn, endSignedIn, errorText } from './api.js';
import { navigate, onLink, usePath } from './router.js';
import type { Me } from './types.js';
import { SignIn, SignUp } from './pages/auth.js';
import { MachinesPage } from './pages/machines.js';
import { MachinePage } from './pages/machine.js';
import { BillingPage } from './pages/billing.js';
import { OrgPage } from './pages/org.js';

function App() {
  const path = usePath();
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const refresh = useCallback(async () => {
    try {
      const who = await api<Me>('GET', '/v1/auth/me');
      beginSignedIn();
      setMe(who);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) setMe(null);
      else setError(errorText(e));
    }
  }, []);
  useEffect(() => void refresh(), [refresh]);

  const publicPage = path === '/signin' || path === '/signup';
  useEffect(() => {
    if (me === null && !publicPage) navigate('/signin', true);
  }, [me, publicPage]);

  if (path === '/signin') return <SignIn onDone={refresh} />;
  if (path === '/signup') return <SignUp onDone={refresh} />;
  if (me === undefined) return <p class="loading" role="status">{error ?? 'Loading…'}</p>;
  if (me === null) return null;

  const signOut = async () => {
    // Stop everything the page is loading (thumbnails, polls) before the cookie stops working.
    endSignedIn();
    await api('POST', '/v1/auth/logout').catch(() => {});
    setMe(null);
    navigate('/signin');
  };
  const switchOrg = async (id: string) => {
    try {
      setMe(await api<Me>('POST', '/v1/auth/switch-organization', { organization_id: id }));
      navigate('/');
    } catch (e) {
      setError(errorText(e));
    }
  };
  const m = /^\/machines\/([A-Za-z0-9_]+)(?:\/([a-z]+))?$/.exec(path);
  let page;
  if (m) page = <MachinePage key={m[1]} id={m[1]!} tab={m[2] ?? 'screen'} me={me} />;
  else if (path === '/billing') page = <BillingPage me={me} />;
  else if (path === '/organization') page = <OrgPage me={me} onMembershipChange={refresh} />;
  else page = <MachinesPage />;

  const nav = [
    ['/', 'Machines'],
    ['/billing', 'Billing'],
    ['/organization', 'Organization'],
  ] as const;
  return (
    <div class="shell">
      <header class="top">
        <a href="/" class="brand" onClick={onLink}>computer</a>
        <nav aria-label="Main">
          {nav.map(([href, label]) => (
            <a key={href} href={href} onClick={onLink} aria-current={(href === '/' ? path === '/' || path.startsWith('/machines') : path === href) ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <div class="who">
          <label class="org">
            <span class="sr-only">Organization</span>
            <select aria-label="Organization" value={me.organization?.id ?? ''} onChange={(e) => void switchOrg((e.currentTarget as HTMLSelectElement).value)}>
              {me.organizations.map((o) => (
                <option key={o.id} value={o.id}>{o.name}</option>
              ))}
            </select>
          </label>
          <span class="email">{me.user.email}</span>
          <button type="button" onClick={signOut}>Sign out</button>
        </div>
      </header>
      {error && <p role="alert" class="error">{error}</p>}
      <main>{page}</main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
