// The overview: what runs now and what failed last.
import { html } from '../lib/html.js';
import * as api from '../lib/api.js';
import { href } from '../lib/router.js';
import { useAsync, useThrottle, ErrorNote, Loading, Page, Card, Stat, StatusBadge, Table } from '../lib/components.js';
import { useEvents } from '../lib/events.js';
import { ago } from '../lib/format.js';

const ACTIVE_JOB = new Set(['running', 'failing']);

async function loadOverview() {
  const [clusters, jobs, hosts] = await Promise.all([
    api.call('cluster.list', {}),
    api.call('job.list', { limit: 200 }),
    api.call('host.list', {}).catch((e) => ({ error: e })),
  ]);
  const live = clusters.clusters.filter((c) => c.status !== 'terminated');
  const byId = Object.fromEntries(clusters.clusters.map((c) => [c.id, c]));
  return {
    clusters: live,
    byId,
    nodes: live.reduce((n, c) => n + (c.size || 0), 0),
    running: jobs.jobs.filter((j) => ACTIVE_JOB.has(j.status)),
    failures: jobs.jobs.filter((j) => j.status === 'failed' || j.status === 'aborted').slice(0, 6),
    hosts: hosts.error ? null : hosts.hosts,
    hostsError: hosts.error || null,
  };
}

export function HomeScreen({ session }) {
  const { data, error, reload } = useAsync(loadOverview, []);
  const later = useThrottle(reload, 1000);
  useEvents({}, (e) => { if (e.type === 'job' || e.type === 'cluster' || e.type === 'host') later(); }, reload);

  if (!data && error) return html`<${Page} title="Overview"><${ErrorNote} error=${error} onRetry=${reload} /><//>`;
  if (!data) return html`<${Page} title="Overview"><${Loading} /><//>`;
  const liveHosts = data.hosts ? data.hosts.filter((h) => h.live).length : null;
  const name = (j) => data.byId[j.cluster_id]?.name || `cluster ${j.cluster_id}`;

  return html`<${Page} title="Overview" subtitle=${`Signed in as ${session.user} (${session.role}) in tenant ${session.tenant}`}
      actions=${html`<a class="button primary" href=${href('/create')}>New cluster</a>`}>
    <${ErrorNote} error=${error} onRetry=${reload} />
    <div class="stats">
      <${Stat} label="live clusters" value=${data.clusters.length} href=${href('/clusters')} testid="stat-clusters" />
      <${Stat} label="live nodes" value=${data.nodes} testid="stat-nodes" />
      <${Stat} label="jobs running" value=${data.running.length} testid="stat-jobs" />
      <${Stat} label="hosts live" value=${liveHosts === null ? '—' : `${liveHosts}/${data.hosts.length}`} testid="stat-hosts"
        hint=${data.hostsError ? data.hostsError.message : null} />
    </div>
    <div class="stack">
      <${Card} title="Running now">
        <${Table} testid="running-jobs" rows=${data.running} empty="No job is running."
          columns=${[
            { title: 'Job', render: (j) => html`<a href=${href('/jobs/' + j.id)}>#${j.id}</a>` },
            { title: 'Cluster', render: (j) => html`<a href=${href('/clusters/' + j.cluster_id)}>${name(j)}</a>` },
            { title: 'Operation', key: 'operation' },
            { title: 'Status', render: (j) => html`<${StatusBadge} status=${j.status} />` },
            { title: 'Started', render: (j) => ago(j.created_at_ms) },
          ]} />
      <//>
      <${Card} title="Last failures">
        <${Table} testid="failures" rows=${data.failures} empty="Nothing failed lately."
          columns=${[
            { title: 'Job', render: (j) => html`<a href=${href('/jobs/' + j.id)}>#${j.id}</a>` },
            { title: 'Cluster', render: (j) => html`<a href=${href('/clusters/' + j.cluster_id)}>${name(j)}</a>` },
            { title: 'Operation', key: 'operation' },
            { title: 'What happened', className: 'wrap', render: (j) => html`<span class="message">${j.message || j.status}</span>` },
            { title: 'When', render: (j) => ago(j.finished_at_ms || j.updated_at_ms) },
          ]} />
      <//>
    </div>
  <//>`;
}
