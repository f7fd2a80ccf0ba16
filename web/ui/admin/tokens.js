// API tokens: made for the logged-in user (a token acts as the user who made
// it), shown once when made, listed, revoked.
import { html, useState } from './deps.js';
import { call } from './client.js';
import { useLoad, useAction, Loading, ErrorText, ConfirmButton, formatTime } from './kit.js';

export default function TokensScreen() {
  const tokens = useLoad(() => call('token.list', {}), []);
  const [draft, setDraft] = useState({ name: '', ttl: '30d' });
  const [made, setMade] = useState(null);
  const create = useAction();
  const revoke = useAction();
  const submit = (e) => {
    e.preventDefault();
    create.run(async () => {
      const body = {};
      if (draft.name) body.name = draft.name;
      if (draft.ttl) body.ttl = draft.ttl;
      setMade(await call('token.create', body));
      tokens.reload();
    });
  };
  const doRevoke = (id) => revoke.run(async () => { await call('token.revoke', { id }); tokens.reload(); });
  return html`<section class="page admin-tokens">
    <h1>API tokens</h1>
    <p class="muted">A token acts as the user who made it, until it expires or is revoked. Send it as <code>Authorization: Bearer …</code>.</p>
    <form class="card card-body row inline-form" onSubmit=${submit}>
      <label>Name <input type="text" name="token-name" value=${draft.name} onInput=${(e) => setDraft({ ...draft, name: e.target.value })} /></label>
      <label>Expires after <input type="text" name="token-ttl" value=${draft.ttl} placeholder="30d" onInput=${(e) => setDraft({ ...draft, ttl: e.target.value })} /></label>
      <button type="submit" class="button primary" disabled=${create.busy}>Create token</button>
      <${ErrorText} error=${create.error} />
    </form>
    ${made ? html`<div class="info-note secret-once" role="status">
      <p>The token's secret, shown this once only: copy it now.</p>
      <code class="secret" data-token-secret>${made.secret ?? made.token}</code>
      <button type="button" class="button" onClick=${() => setMade(null)}>Done</button></div>` : null}
    <${Loading} state=${tokens} />
    <${ErrorText} error=${revoke.error} />
    ${tokens.data ? html`<div class="table-wrap"><table class="table">
      <thead><tr><th>Id</th><th>Name</th><th>User</th><th>Created</th><th>Expires</th><th>Last used</th><th></th></tr></thead>
      <tbody>${(tokens.data.tokens || []).length === 0 ? html`<tr><td colspan="7" class="muted">No tokens.</td></tr>` : null}
        ${(tokens.data.tokens || []).map((t) => html`<tr data-token=${t.id} class=${t.revoked ? 'muted' : ''}>
        <td><code>${t.id}</code></td><td>${t.name || ''}</td><td>${t.user}</td><td>${formatTime(t.created_at_ms)}</td>
        <td>${formatTime(t.expires_at_ms)}</td><td>${formatTime(t.last_used_ms)}</td>
        <td>${t.revoked ? 'revoked' : html`<${ConfirmButton} label="Revoke" onConfirm=${() => doRevoke(t.id)} />`}</td></tr>`)}
      </tbody></table></div>` : null}
  </section>`;
}
