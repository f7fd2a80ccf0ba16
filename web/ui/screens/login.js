// Sign in with tenant, user and password, or with an API token.
import { html, useState } from '../lib/html.js';
import * as api from '../lib/api.js';
import { ErrorNote } from '../lib/components.js';

export function LoginScreen({ onLogin, notice, bootError }) {
  const [mode, setMode] = useState('password');
  const [tenant, setTenant] = useState(() => localStorage.getItem('weft.tenant') || 'default');
  const [user, setUser] = useState(() => localStorage.getItem('weft.user') || '');
  const [password, setPassword] = useState('');
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);

  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const s = await api.login(mode === 'password' ? { tenant, user, password } : { token: token.trim() });
      if (mode === 'password') {
        localStorage.setItem('weft.tenant', tenant);
        localStorage.setItem('weft.user', user);
      }
      onLogin(s);
    } catch (err) {
      // weftd does not say which of the three was wrong (on purpose: nobody
      // learns which tenants and users exist), and the tenant may be the one.
      const wrong = mode === 'password' && err instanceof api.ApiError && err.status === 403 && err.code === 'DENIED';
      setError(wrong ? new api.ApiError(err.status, err.code, 'Wrong tenant, user name or password.', err.details) : err);
      setPassword('');
    } finally {
      setBusy(false);
    }
  };

  return html`<div class="login-page">
    <form class="login-card" onSubmit=${submit} data-testid="login-form">
      <div class="login-brand"><img src="favicon.svg" alt="" width="40" height="40" />
        <div><div class="login-title">Weft</div><div class="login-sub">Clusters as single entities</div></div></div>
      ${notice ? html`<div class="info-note" data-testid="login-notice">${notice}</div>` : null}
      <${ErrorNote} error=${bootError} />
      <div class="tabs" role="tablist">
        <button type="button" role="tab" aria-selected=${mode === 'password'} class=${'tab' + (mode === 'password' ? ' active' : '')}
          onClick=${() => setMode('password')}>Password</button>
        <button type="button" role="tab" aria-selected=${mode === 'token'} class=${'tab' + (mode === 'token' ? ' active' : '')}
          onClick=${() => setMode('token')}>API token</button>
      </div>
      ${mode === 'password' ? html`
        <label class="field"><span class="field-label">Tenant</span>
          <input name="tenant" autocomplete="organization" required value=${tenant} onInput=${(e) => setTenant(e.target.value)} />
          <span class="field-hint" data-testid="tenant-hint">Your organization's tenant. The superadmin signs in with tenant <code>_system</code>.</span></label>
        <label class="field"><span class="field-label">User</span>
          <input name="user" autocomplete="username" required autofocus value=${user} onInput=${(e) => setUser(e.target.value)} /></label>
        <label class="field"><span class="field-label">Password</span>
          <input name="password" type="password" autocomplete="current-password" required value=${password}
            onInput=${(e) => setPassword(e.target.value)} /></label>` : html`
        <label class="field"><span class="field-label">API token</span>
          <input name="token" type="password" autocomplete="off" required value=${token} onInput=${(e) => setToken(e.target.value)} />
          <span class="field-hint">Made with <code>weft token create</code>; it acts as the user who made it.</span></label>`}
      <${ErrorNote} error=${error} />
      <button class="button primary wide" type="submit" disabled=${busy} data-testid="login-submit">${busy ? 'Signing in…' : 'Sign in'}</button>
    </form>
  </div>`;
}
