// The signed-in user's own account: a new password, and their API tokens
// (a token acts as its maker, for scripts and for signing in).
import { html, useState } from '../lib/html.js';
import * as api from '../lib/api.js';
import { useAsync, useAction, ErrorNote, Loading, Page, Card, Field, Table, ConfirmDialog } from '../lib/components.js';
import { dateTime, until, parseDuration } from '../lib/format.js';

function PasswordCard({ session, onChanged }) {
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const change = useAction(async () => {
    await api.call('user.password', { name: session.user, password });
    onChanged();
  });
  const mismatch = again && password !== again ? 'The two passwords differ.' : null;
  const short = password && password.length < 8 ? 'At least 8 characters.' : null;
  return html`<${Card} title="Password">
    <form class="stack" onSubmit=${(e) => { e.preventDefault(); change.run(); }} data-testid="password-form">
      <p class="muted">Changing it signs you out everywhere, this browser too.</p>
      <div class="form-grid">
        <${Field} label="New password" error=${short}>
          <input type="password" name="new-password" autocomplete="new-password" value=${password} onInput=${(e) => setPassword(e.target.value)} /><//>
        <${Field} label="Once more" error=${mismatch}>
          <input type="password" name="new-password-again" autocomplete="new-password" value=${again} onInput=${(e) => setAgain(e.target.value)} /><//>
      </div>
      <div class="row"><button class="button primary" type="submit" disabled=${!password || short || password !== again || change.busy}>
        ${change.busy ? 'Changing…' : 'Change password'}</button></div>
      <${ErrorNote} error=${change.error} />
    </form>
  <//>`;
}

function TokensCard() {
  const tokens = useAsync(() => api.call('token.list', {}), []);
  const [name, setName] = useState('');
  const [ttl, setTtl] = useState('30d');
  const [made, setMade] = useState(null);
  const [revoking, setRevoking] = useState(null);
  const ttlMs = ttl.trim() === '0' ? 0 : parseDuration(ttl);
  const create = useAction(async () => {
    const body = { ttl_ms: ttlMs };
    if (name.trim()) body.name = name.trim();
    setMade(await api.call('token.create', body));
    setName('');
    tokens.reload();
  });
  return html`<${Card} title="API tokens">
    <div class="stack">
      <p class="muted">A token acts as you until it expires or is revoked: scripts send it as <code>Authorization: Bearer …</code>, and it also signs in here.</p>
      <form class="row" onSubmit=${(e) => { e.preventDefault(); create.run(); }}>
        <input name="token-name" placeholder="what it is for" value=${name} onInput=${(e) => setName(e.target.value)} />
        <input name="token-ttl" size="6" value=${ttl} title="expires after (0: never)" onInput=${(e) => setTtl(e.target.value)} />
        <button class="button" type="submit" disabled=${ttlMs === null || create.busy}>Create token</button>
        ${ttlMs === null ? html`<span class="field-error">A duration such as 30d, 12h or 0 for never.</span>` : null}
      </form>
      <${ErrorNote} error=${create.error} />
      ${made ? html`<div class="info-note stack" role="status">
        <div>Token ${made.id}${made.name ? ` (${made.name})` : ''}: copy the secret now, it is not shown again.</div>
        <code class="mono" data-testid="token-secret">${made.token}</code>
        <div><button class="button small" onClick=${() => setMade(null)}>Done</button></div></div>` : null}
      <${ErrorNote} error=${tokens.error} onRetry=${tokens.reload} />
      ${tokens.data ? html`<${Table} rows=${tokens.data.tokens} empty="No token yet."
        columns=${[
          { title: 'Id', key: 'id' },
          { title: 'Name', key: 'name' },
          { title: 'Created', render: (t) => dateTime(t.created_at_ms) },
          { title: 'Expires', render: (t) => (t.expires_at_ms ? until(t.expires_at_ms) : 'never') },
          { title: '', render: (t) => html`<button class="button small danger" onClick=${() => setRevoking(t)}>Revoke</button>` },
        ]} />` : html`<${Loading} />`}
    </div>
    ${revoking ? html`<${ConfirmDialog} title=${`Revoke token ${revoking.id}?`} danger confirmLabel="Revoke"
      message="Scripts using it are refused from now on, and browser sessions signed in with it end." onClose=${() => setRevoking(null)}
      onConfirm=${async () => { await api.call('token.revoke', { id: revoking.id }); tokens.reload(); }} />` : null}
  <//>`;
}

export function AccountScreen({ session, onPasswordChanged }) {
  return html`<${Page} title="Your account" subtitle=${`${session.user} · ${session.role} in tenant ${session.tenant}`}>
    <${PasswordCard} session=${session} onChanged=${onPasswordChanged} />
    <${TokensCard} />
  <//>`;
}
