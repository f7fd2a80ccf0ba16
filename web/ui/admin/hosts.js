// Hosts: who is live, their capacity, tasks in flight, plugins and workers;
// keys asking to be accepted; revocation; one-time enrollment tokens.
import { html, useState, StatusBadge } from './deps.js';
import { call } from './client.js';
import { useLoad, useAction, Loading, ErrorText, ConfirmButton, formatTime } from './kit.js';

function workersText(workers) {
  if (!workers || workers.length === 0) return '—';
  return workers.map((w) => `${w.tenant || 'any tenant'}: ${w.threads}${w.pid ? ` (pid ${w.pid})` : ''}`).join(', ');
}

function HostTable({ hosts, onChanged, superadmin }) {
  const action = useAction();
  const revoke = (id) => action.run(async () => { await call('host.revoke', { host_id: id }); onChanged(); });
  return html`<${ErrorText} error=${action.error} />
    <div class="table-wrap"><table class="table hosts">
    <thead><tr><th>Host</th><th>State</th><th>Capacity</th><th>In flight</th><th>Plugins</th><th>Workers wanted</th><th>Workers running</th><th>Last seen</th>${superadmin ? html`<th></th>` : null}</tr></thead>
    <tbody>${hosts.length === 0 ? html`<tr><td colspan="9" class="muted">No host has registered.</td></tr>` : null}
      ${hosts.map((h) => html`<tr data-host=${h.id}>
      <td>${h.id}<br /><small class="muted">${h.version || ''}</small></td>
      <td><${StatusBadge} status=${h.live ? 'live' : 'silent'} /></td>
      <td>${h.capacity}</td><td>${h.in_flight}</td>
      <td class="wrap"><span class="chips">${(h.plugins || []).map((p) => html`<span class="chip">${p}</span>`)}</span></td>
      <td>${workersText(h.workers)}</td><td>${workersText(h.reported_workers)}</td>
      <td>${formatTime(h.last_seen_ms)}</td>
      ${superadmin ? html`<td><${ConfirmButton} label="Revoke" confirmLabel=${`Revoke ${h.id}'s key`} onConfirm=${() => revoke(h.id)} /></td>` : null}
    </tr>`)}</tbody></table></div>`;
}

function Requests({ onChanged }) {
  const requests = useLoad(() => call('host.requests', {}), []);
  const action = useAction();
  const accept = (r) => action.run(async () => { await call('host.accept', { host_id: r.host_id, fingerprint: r.fingerprint }); requests.reload(); onChanged(); });
  return html`<div class="card card-body stack">
    <h2>Keys asking to be accepted</h2>
    <${Loading} state=${requests} />
    <${ErrorText} error=${action.error} />
    ${requests.data ? (requests.data.requests.length === 0 ? html`<p class="muted">None.</p>` : html`<div class="table-wrap"><table class="table">
      <thead><tr><th>Host</th><th>Key fingerprint</th><th>From</th><th>Asked</th><th></th></tr></thead>
      <tbody>${requests.data.requests.map((r) => html`<tr data-request=${r.host_id}>
        <td>${r.host_id}</td><td><code>${r.fingerprint}</code></td><td>${r.address}</td><td>${formatTime(r.requested_at_ms)}</td>
        <td><button type="button" class="button" disabled=${action.busy} onClick=${() => accept(r)}>Accept</button></td></tr>`)}</tbody></table></div>`) : null}
  </div>`;
}

function EnrollmentToken() {
  const [draft, setDraft] = useState({ host_id: '', ttl_hours: 1, force: false });
  const [made, setMade] = useState(null);
  const action = useAction();
  const submit = (e) => {
    e.preventDefault();
    action.run(async () => {
      const body = { ttl_ms: Math.round(draft.ttl_hours * 3600 * 1000) };
      if (draft.host_id) body.host_id = draft.host_id;
      if (draft.host_id && draft.force) body.force = true;
      setMade(await call('host.token.create', body));
    });
  };
  return html`<form class="card card-body row inline-form" onSubmit=${submit}>
    <h2>Enrollment token</h2>
    <p class="muted">A one-time token for a host to start with (<code>enroll_token</code> in its weft-host.toml); without a host id it enrolls only a host weftd does not know.</p>
    <label>Host id <input type="text" name="enroll-host" value=${draft.host_id} onInput=${(e) => setDraft({ ...draft, host_id: e.target.value })} /></label>
    <label>Valid for (hours) <input type="number" name="enroll-ttl" min="0.001" step="any" value=${draft.ttl_hours} onInput=${(e) => setDraft({ ...draft, ttl_hours: Number(e.target.value) })} /></label>
    <label class="check"><input type="checkbox" name="enroll-force" disabled=${!draft.host_id} checked=${draft.force} onChange=${(e) => setDraft({ ...draft, force: e.target.checked })} /> replace a live host's key</label>
    <button type="submit" class="button primary" disabled=${action.busy}>Make token</button>
    <${ErrorText} error=${action.error} />
    ${made ? html`<div class="info-note secret-once" role="status"><p>Shown once, valid until ${formatTime(made.expires_at_ms)}:</p>
      <code class="secret" data-enroll-token>${made.token}</code></div>` : null}
  </form>`;
}

export default function HostsScreen({ session }) {
  const superadmin = session?.role === 'superadmin';
  const hosts = useLoad(() => call('host.list', {}), []);
  return html`<section class="page admin-hosts">
    <header class="page-head"><h1>Hosts</h1><div class="page-actions"><button type="button" class="button" onClick=${hosts.reload}>Refresh</button></div></header>
    <${Loading} state=${hosts} />
    ${hosts.data ? html`<${HostTable} hosts=${hosts.data.hosts} superadmin=${superadmin} onChanged=${hosts.reload} />` : null}
    ${superadmin ? html`<${Requests} onChanged=${hosts.reload} /><${EnrollmentToken} />` : null}
  </section>`;
}
