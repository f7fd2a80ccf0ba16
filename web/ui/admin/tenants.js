// Tenants (superadmin): their quotas, and the worker threads the hosts give
// each of them now (the worker split, summed over the live hosts).
import { html, useState } from './deps.js';
import { call } from './client.js';
import { useLoad, useAction, Loading, ErrorText, ConfirmButton } from './kit.js';

const QUOTAS = [['max_clusters', 'Clusters'], ['max_nodes', 'Nodes'], ['max_workers', 'Worker threads']];

// Threads per tenant over the live hosts; '' is "any tenant".
function workerSplit(hosts) {
  const split = {};
  for (const host of hosts || []) {
    if (!host.live) continue;
    for (const w of host.workers || []) split[w.tenant] = (split[w.tenant] || 0) + w.threads;
  }
  return split;
}

function QuotaInputs({ quotas, onChange, prefix }) {
  return QUOTAS.map(([key, label]) => html`<label class="quota">${label}
    <input type="number" min="0" step="1" name=${`${prefix}-${key}`} value=${quotas[key] ?? 0}
      onInput=${(e) => onChange({ ...quotas, [key]: e.target.value === '' ? 0 : Number(e.target.value) })} /></label>`);
}

function TenantRow({ tenant, threads, onChanged }) {
  const [editing, setEditing] = useState(null);
  const action = useAction();
  const limit = (n) => (n ? n : html`<span class="muted">no limit</span>`);
  const save = () => action.run(async () => { await call('tenant.update', { name: tenant.name, ...editing }); setEditing(null); onChanged(); });
  const remove = () => action.run(async () => { await call('tenant.delete', { name: tenant.name }); onChanged(); });
  return html`<tr data-tenant=${tenant.name}>
    <td>${tenant.name}</td>
    ${editing
      ? QUOTAS.map(([key, label]) => html`<td><input class="count" type="number" min="0" step="1" aria-label=${`max ${label.toLowerCase()} of ${tenant.name}`}
          name=${`${tenant.name}-${key}`} value=${editing[key]}
          onInput=${(e) => setEditing({ ...editing, [key]: e.target.value === '' ? 0 : Number(e.target.value) })} /></td>`)
      : QUOTAS.map(([key]) => html`<td>${limit(tenant[key])}</td>`)}
    <td>${threads ?? 0}</td>
    <td class="actions">${editing
      ? html`<button type="button" class="button primary" disabled=${action.busy} onClick=${save}>Save</button><button type="button" class="button" onClick=${() => setEditing(null)}>Cancel</button>`
      : html`<button type="button" class="button" onClick=${() => setEditing(Object.fromEntries(QUOTAS.map(([k]) => [k, tenant[k] || 0])))}>Edit quotas</button>
        ${tenant.name === 'default' ? null : html`<${ConfirmButton} label="Delete" confirmLabel=${`Delete tenant ${tenant.name} and revoke its users' keys`} onConfirm=${remove} />`}`}
      <${ErrorText} error=${action.error} /></td>
  </tr>`;
}

export default function TenantsScreen() {
  const tenants = useLoad(() => call('tenant.list', {}), []);
  const hosts = useLoad(() => call('host.list', {}), []);
  const [draft, setDraft] = useState({ name: '', max_clusters: 0, max_nodes: 0, max_workers: 0 });
  const create = useAction();
  const split = workerSplit(hosts.data?.hosts);
  const reload = () => { tenants.reload(); hosts.reload(); };
  const submit = (e) => {
    e.preventDefault();
    create.run(async () => { await call('tenant.create', draft); setDraft({ name: '', max_clusters: 0, max_nodes: 0, max_workers: 0 }); reload(); });
  };
  return html`<section class="page admin-tenants">
    <h1>Tenants</h1>
    <p class="muted">Quotas are checked as clusters are created and grown (0: no limit). Worker threads: what the live hosts run for each tenant now; the split follows the tenants with work.</p>
    <${Loading} state=${tenants} />
    ${tenants.data ? html`<div class="table-wrap"><table class="table">
      <thead><tr><th>Tenant</th>${QUOTAS.map(([, label]) => html`<th>Max ${label.toLowerCase()}</th>`)}<th>Worker threads now</th><th></th></tr></thead>
      <tbody>${tenants.data.tenants.map((t) => html`<${TenantRow} key=${t.name} tenant=${t} threads=${split[t.name]} onChanged=${reload} />`)}
        ${split[''] ? html`<tr class="muted"><td>(any tenant)</td><td colspan="3"></td><td>${split['']}</td><td></td></tr>` : null}
      </tbody></table></div>` : null}
    <form class="card card-body row inline-form" onSubmit=${submit}>
      <h2>New tenant</h2>
      <label>Name <input type="text" name="tenant-name" required value=${draft.name} onInput=${(e) => setDraft({ ...draft, name: e.target.value })} /></label>
      <${QuotaInputs} prefix="new" quotas=${draft} onChange=${(q) => setDraft({ ...draft, ...q })} />
      <button type="submit" class="button primary" disabled=${create.busy}>Create tenant</button>
      <${ErrorText} error=${create.error} />
    </form>
  </section>`;
}
