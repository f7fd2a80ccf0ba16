// API tokens: made for the signed-in user (a token acts as the user who made
// it), shown once when made, listed, revoked. An admin sees and revokes the
// tenant's tokens.
import { html, useState, parseDuration } from './deps.js';
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
      if (draft.ttl) {
        const ms = parseDuration(draft.ttl);
        if (ms === null) throw { message: `'${draft.ttl}' is not a duration; write it like 12h, 30d or 1w` };
        body.ttl_ms = ms;
      }
      setMade(await call('token.create', body));
      tokens.reload();
    });
  };
  const doRevoke = (id) => revoke.run(async () => { await call('token.revoke', { id }); tokens.reload(); });
  const list = tokens.data?.tokens || [];
  return html`<section class="page admin-tokens">
    <h1>API tokens</h1>
    <p class="muted">A token acts as the user who made it until it expires or is revoked: send it as <code>Authorization: Bearer …</code>, or sign in with it.</p>
    <form class="card card-body row inline-form" onSubmit=${submit}>
      <h2>New token for you</h2>
      <label>Name <input type="text" name="token-name" maxlength="64" value=${draft.name} onInput=${(e) => setDraft({ ...draft, name: e.target.value })} /></label>
      <label>Expires after <input type="text" name="token-ttl" value=${draft.ttl} placeholder="30d" onInput=${(e) => setDraft({ ...draft, ttl: e.target.value.trim() })} /></label>
      <button type="submit" class="button primary" disabled=${create.busy}>Create token</button>
      <${ErrorText} error=${create.error} />
    </form>
    ${made ? html`<div class="info-note stack secret-once" role="status">
      <p>Token ${made.id}${made.name ? ` (${made.name})` : ''}: its secret is shown this once only, copy it now.</p>
      <code class="secret" data-token-secret>${made.token}</code>
      <div><button type="button" class="button small" onClick=${() => setMade(null)}>Done</button></div></div>` : null}
    <${Loading} state=${tokens} />
    <${ErrorText} error=${revoke.error} />
    ${tokens.data ? html`<div class="table-wrap"><table class="table">
      <thead><tr><th>Id</th><th>Name</th><th>User</th><th>Created</th><th>Expires</th><th></th></tr></thead>
      <tbody>${list.length === 0 ? html`<tr><td colspan="6" class="muted">No token in force.</td></tr>` : null}
        ${list.map((t) => html`<tr data-token=${t.id}>
        <td><code>${t.id}</code></td><td>${t.name || ''}</td><td>${t.user}${t.tenant === '_system' ? ' (superadmin)' : ''}</td>
        <td>${formatTime(t.created_at_ms)}</td><td>${t.expires_at_ms ? formatTime(t.expires_at_ms) : 'never'}</td>
        <td><${ConfirmButton} label="Revoke" title=${`Revoke token ${t.id}`} message="Programs using it are refused from now on, and browser sessions signed in with it end."
          onConfirm=${() => doRevoke(t.id)} /></td></tr>`)}
      </tbody></table></div>` : null}
  </section>`;
}
