/** Sign in and sign up: the cookie is set by the server (HttpOnly); nothing is stored by the page. */
import { useState } from 'preact/hooks';
import { api, errorText } from '../api.js';
import { navigate, onLink } from '../router.js';

function field(e: Event): string {
  return (e.currentTarget as HTMLInputElement).value;
}

/** A form's submit handler: runs `action`, then shows the error envelope's text in the form if it failed. */
function useSubmit(action: () => Promise<void>): [string | null, (e: Event) => Promise<void>] {
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      await action();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return [error, submit];
}

export function SignIn({ onDone }: { onDone: () => Promise<void> }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, submit] = useSubmit(async () => {
    await api('POST', '/v1/auth/login', { email, password });
    await onDone();
    navigate('/');
  });
  return (
    <main class="auth">
      <h1>Sign in</h1>
      <form onSubmit={submit}>
        <label>E-mail<input type="email" autocomplete="username" required value={email} onInput={(e) => setEmail(field(e))} /></label>
        <label>Password<input type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(field(e))} /></label>
        {error && <p role="alert" class="error">{error}</p>}
        <button type="submit">Sign in</button>
      </form>
      <p>No account? <a href="/signup" onClick={onLink}>Sign up</a></p>
    </main>
  );
}

export function SignUp({ onDone }: { onDone: () => Promise<void> }) {
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, submit] = useSubmit(async () => {
    await api('POST', '/v1/auth/signup', { email, password, ...(name ? { name } : {}) });
    await onDone();
    // A new organization has no subscription yet: the trial checkout comes first.
    navigate('/billing');
  });
  return (
    <main class="auth">
      <h1>Create your account</h1>
      <form onSubmit={submit}>
        <label>Name<input autocomplete="name" value={name} onInput={(e) => setName(field(e))} /></label>
        <label>E-mail<input type="email" autocomplete="username" required value={email} onInput={(e) => setEmail(field(e))} /></label>
        <label>Password (10 characters or more)<input type="password" autocomplete="new-password" minLength={10} required value={password} onInput={(e) => setPassword(field(e))} /></label>
        {error && <p role="alert" class="error">{error}</p>}
        <button type="submit">Sign up</button>
      </form>
      <p>Have an account? <a href="/signin" onClick={onLink}>Sign in</a></p>
    </main>
  );
}
