// The audit log: who changed what, as what role, from where, when. Filters
// are the ones audit.list takes (user, cluster, since, limit).
import { html, useState } from './deps.js';
import { call } from './client.js';
import { useLoad, Loading, formatTime } from './kit.js';

// The parameters weftd recorded, as key=value; `via` (the gateway a browser
// went through) is shown with who did it instead.
function detailText(detail) {
  const entries = Object.entries(detail || {}).filter(([k]) => k !== 'via');
  return entries.map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
}

export default function AuditScreen() {
  const [filters, setFilters] = useState({ user: '', cluster: '', since: '', limit: 200 });
  const [applied, setApplied] = useState(filters);
  const audit = useLoad(() => {
    const body = { limit: Number(applied.limit) || 200 };
    if (applied.user) body.user = applied.user;
    if (applied.cluster) body.cluster = applied.cluster;
    if (applied.since) body.since_ms = Date.parse(applied.since);
    return call('audit.list', body);
  }, [applied]);
  const entries = audit.data ? [...audit.data.entries].reverse() : [];
  return html`<section class="page admin-audit">
    <h1>Audit log</h1>
    <form class="card card-body row inline-form" onSubmit=${(e) => { e.preventDefault(); setApplied({ ...filters }); }}>
      <label>User <input type="text" name="audit-user" value=${filters.user} onInput=${(e) => setFilters({ ...filters, user: e.target.value.trim() })} /></label>
      <label>Cluster <input type="text" name="audit-cluster" value=${filters.cluster} onInput=${(e) => setFilters({ ...filters, cluster: e.target.value.trim() })} /></label>
      <label>Since <input type="datetime-local" name="audit-since" value=${filters.since} onInput=${(e) => setFilters({ ...filters, since: e.target.value })} /></label>
      <label>At most <input type="number" name="audit-limit" min="1" max="100000" value=${filters.limit} onInput=${(e) => setFilters({ ...filters, limit: e.target.value })} /></label>
      <button type="submit" class="button primary">Show</button>
    </form>
    <${Loading} state=${audit} />
    ${audit.data ? html`<p class="muted">${entries.length} entr${entries.length === 1 ? 'y' : 'ies'}, newest first.</p>
      <div class="table-wrap"><table class="table audit">
      <thead><tr><th>When</th><th>Who</th><th>Op</th><th>Tenant</th><th>Target</th><th>Outcome</th><th>Detail</th></tr></thead>
      <tbody>${entries.map((e) => html`<tr data-audit=${e.id}>
        <td>${formatTime(e.at_ms)}</td>
        <td>${e.actor} <small class="muted">${e.actor_role}${e.actor_tenant && e.actor_tenant !== e.tenant ? ` of ${e.actor_tenant}` : ''}${e.address ? `, from ${e.address}` : ''}${e.detail?.via ? `, via ${e.detail.via}` : ''}</small></td>
        <td><code>${e.op}</code></td><td>${e.tenant}</td><td>${e.target}</td><td>${e.outcome}</td>
        <td><small>${detailText(e.detail)}</small></td></tr>`)}</tbody></table></div>` : null}
  </section>`;
}
