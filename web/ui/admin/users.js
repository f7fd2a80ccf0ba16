// Users of the acting tenant: create (user or admin), delete (their keys are
// revoked), set a password for the web UI.
import { html, useState } from './deps.js';
import { call } from './client.js';
import { useLoad, useAction, Loading, ErrorText, ConfirmButton, formatTime } from './kit.js';

function PasswordForm({ user, onDone }) {
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const action = useAction();
  const submit = (e) => {
    e.preventDefault();
    if (password !== again) return action.setError({ message: 'the two passwords differ' });
    return action.run(async () => { await call('user.password', { name: user, password }); onDone(`Password of ${user} set.`); });
  };
  return html`<form class="row inline-form password-form" onSubmit=${submit}>
    <label>New password <input type="password" name="password" autocomplete="new-password" required value=${password} onInput=${(e) => setPassword(e.target.value)} /></label>
    <label>Again <input type="password" name="password-again" autocomplete="new-password" required value=${again} onInput=${(e) => setAgain(e.target.value)} /></label>
    <button type="submit" class="button primary" disabled=${action.busy}>Set password</button>
    <button type="button" class="button" onClick=${() => onDone(null)}>Cancel</button>
    <${ErrorText} error=${action.error} />
  </form>`;
}

function UserRow({ user, onChanged, onNotice }) {
  const [settingPassword, setSettingPassword] = useState(false);
  const action = useAction();
  const remove = () => action.run(async () => { await call('user.delete', { name: user.name }); onChanged(); });
  return html`<tr data-user=${user.name}>
    <td>${user.name}</td><td>${user.role}</td><td>${user.keys ?? 0}</td><td>${formatTime(user.created_at_ms)}</td>
    <td class="actions">
      ${settingPassword
        ? html`<${PasswordForm} user=${user.name} onDone=${(notice) => { setSettingPassword(false); if (notice) onNotice(notice); }} />`
        : html`<button type="button" class="button" onClick=${() => setSettingPassword(true)}>Set password</button>
          <${ConfirmButton} label="Delete" confirmLabel=${`Delete ${user.name} and revoke their keys`} onConfirm=${remove} />`}
      <${ErrorText} error=${action.error} />
    </td></tr>`;
}

export default function UsersScreen() {
  const users = useLoad(() => call('user.list', {}), []);
  const [draft, setDraft] = useState({ name: '', role: 'user' });
  const [notice, setNotice] = useState(null);
  const create = useAction();
  const submit = (e) => {
    e.preventDefault();
    create.run(async () => {
      const reply = await call('user.create', draft);
      setNotice(`User ${reply.name} (${reply.role}) created in tenant ${reply.tenant}; set a password to let them log in.`);
      setDraft({ name: '', role: 'user' });
      users.reload();
    });
  };
  return html`<section class="page admin-users">
    <h1>Users${users.data ? html` <small class="muted">of tenant ${users.data.tenant}</small>` : null}</h1>
    <${Loading} state=${users} />
    ${notice ? html`<p class="info-note" role="status">${notice}</p>` : null}
    ${users.data ? html`<div class="table-wrap"><table class="table">
      <thead><tr><th>User</th><th>Role</th><th>Keys</th><th>Created</th><th></th></tr></thead>
      <tbody>${users.data.users.map((u) => html`<${UserRow} key=${u.name} user=${u} onChanged=${users.reload} onNotice=${setNotice} />`)}</tbody>
    </table></div>` : null}
    <form class="card card-body row inline-form" onSubmit=${submit}>
      <h2>New user</h2>
      <label>Name <input type="text" name="user-name" required value=${draft.name} onInput=${(e) => setDraft({ ...draft, name: e.target.value })} /></label>
      <label>Role <select name="user-role" value=${draft.role} onChange=${(e) => setDraft({ ...draft, role: e.target.value })}>
        <option value="user">user</option><option value="admin">admin</option></select></label>
      <button type="submit" class="button primary" disabled=${create.busy}>Create user</button>
      <${ErrorText} error=${create.error} />
    </form>
  </section>`;
}
