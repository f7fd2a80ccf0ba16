// The tenant's clusters (a user's own; an admin's whole tenant, with owners).
import { html, useState } from '../lib/html.js';
import * as api from '../lib/api.js';
import { href, navigate } from '../lib/router.js';
import { useAsync, useThrottle, ErrorNote, Loading, Page, StatusBadge, Table } from '../lib/components.js';
import { useEvents } from '../lib/events.js';
import { ago, until } from '../lib/format.js';

const FILTERS = [['live', 'Live'], ['terminated', 'Terminated'], ['all', 'All']];

export function ClustersScreen({ session, query }) {
  const [filter, setFilter] = useState(query.show || 'live');
  const { data, error, reload } = useAsync(() => api.call('cluster.list', filter === 'live' ? {} : { all: true }), [filter]);
  const later = useThrottle(reload, 1000);
  useEvents({}, (e) => { if (e.type === 'cluster' || e.type === 'job') later(); }, reload);
  const isAdmin = session.role !== 'user';
  let rows = data ? data.clusters : [];
  if (filter === 'terminated') rows = rows.filter((c) => c.status === 'terminated');
  const columns = [
    { title: 'Name', render: (c) => html`<a href=${href('/clusters/' + c.id)} data-testid="cluster-link">${c.name}</a>` },
    { title: 'Status', render: (c) => html`<${StatusBadge} status=${c.status} />` },
    { title: 'Template', key: 'template' },
    { title: 'Nodes', className: 'num', key: 'size' },
    { title: 'Services', className: 'wrap', render: (c) => html`<span class="chips">${(c.services || []).map((s) => html`<span class="chip">${s}</span>`)}</span>` },
    isAdmin ? { title: 'Owner', key: 'owner' } : null,
    { title: 'Created', render: (c) => ago(c.created_at_ms) },
    { title: 'Lease', render: (c) => (c.status === 'terminated' ? '—' : until(c.expire_at_ms)) },
    { title: 'Last job', render: (c) => (c.latest_job ? html`<a href=${href('/jobs/' + c.latest_job)}>#${c.latest_job}</a>` : '—') },
  ].filter(Boolean);

  return html`<${Page} title="Clusters" subtitle=${isAdmin ? `Every cluster of tenant ${session.tenant}` : 'Your clusters'}
      actions=${html`<div class="segmented" role="group" aria-label="Show">${FILTERS.map(([k, label]) => html`
        <button class=${filter === k ? 'active' : ''} aria-pressed=${filter === k} onClick=${() => setFilter(k)}>${label}</button>`)}</div>
        <a class="button primary" href=${href('/create')}>New cluster</a>`}>
    <${ErrorNote} error=${error} onRetry=${reload} />
    ${!data && !error ? html`<${Loading} />` : null}
    ${data ? html`<div class="card"><${Table} testid="clusters" rows=${rows} columns=${columns} onRow=${(c) => navigate('/clusters/' + c.id)}
      empty=${filter === 'live' ? html`No live cluster. <a href=${href('/create')}>Make one</a>.` : 'None.'} /></div>` : null}
  <//>`;
}
