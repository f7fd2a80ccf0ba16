// One cluster: its nodes, services, jobs and live progress, and everything a
// user may do to it. Every change can be previewed (a dry run) before it runs.
import { html, useState } from '../lib/html.js';
import * as api from '../lib/api.js';
import { href, navigate } from '../lib/router.js';
import {
  useAsync, useAction, useThrottle, ErrorNote, Loading, Page, Card, StatusBadge, Table, Modal, ConfirmDialog, Field, KeyValues,
} from '../lib/components.js';
import { useEvents } from '../lib/events.js';
import { JobProgress, withJobEvent, jobEnded } from '../lib/job.js';
import { PlanSummary, PlanChange, parseConfig, mergePatch } from '../lib/plan.js';
import { ago, until, dateTime, duration, parseDuration, nodesText } from '../lib/format.js';

async function loadCluster(id) {
  const { cluster } = await api.call('cluster.get', { cluster: id });
  let job = null;
  if (cluster.latest_job) job = (await api.call('job.get', { job: cluster.latest_job })).job;
  // The latest job undoes a failed one: that failure is the news, not the undo.
  let undone = null;
  if (job && job.operation === 'undo' && job.parent_job) {
    undone = await api.call('job.get', { job: job.parent_job, tasks: false }).then((r) => r.job, () => null);
  }
  return { cluster, job, undone };
}

// Says that the latest job undid a failed one, and why that one failed.
function UndoneNote({ undone, undo }) {
  const what = undone.operation || 'job';
  const outcome = undo.status === 'succeeded' ? 'and was undone'
    : jobEnded(undo.status) ? 'and undoing it failed too' : 'and is being undone';
  return html`<div class="error-note" role="status" data-testid="undone-note">
    <strong>${`The ${what} failed ${outcome}`}</strong>${' (job '}<a
      href=${href('/jobs/' + undone.id)}>#${undone.id}</a>${'): '}<span class="message">${undone.message || 'no message'}</span>
  </div>`;
}

function serviceSummary(nodes) {
  const by = new Map();
  for (const n of nodes) {
    for (const s of n.services || []) {
      const e = by.get(s) || { service: s, nodes: 0, states: {} };
      e.nodes += 1;
      const st = (n.service_states || {})[s] || 'unknown';
      e.states[st] = (e.states[st] || 0) + 1;
      by.set(s, e);
    }
  }
  return [...by.values()].sort((a, b) => a.service.localeCompare(b.service));
}

function address(node) {
  const r = node.results || {};
  return r.access_v4 || r.bind_v4 || r.ipaddress || null;
}

function ServicePicker({ options, value, onChange }) {
  const toggle = (s) => onChange(value.includes(s) ? value.filter((x) => x !== s) : [...value, s]);
  if (!options.length) return html`<span class="muted">No service to choose.</span>`;
  return html`<div class="checks">${options.map((s) => html`<label class="check">
    <input type="checkbox" checked=${value.includes(s)} onChange=${() => toggle(s)} />${s}</label>`)}</div>`;
}

// The change dialogs: each builds the op's body from its inputs, may be
// previewed as a dry run, then runs.
function ChangeDialog({ kind, cluster, template, onClose, onStarted }) {
  const running = cluster.services || [];
  const addable = (template?.compatibility?.services || []).filter((s) => !running.includes(s));
  const [size, setSize] = useState(String(cluster.size));
  const [services, setServices] = useState([]);
  const [config, setConfig] = useState('');
  const [restart, setRestart] = useState(false);
  const [lease, setLease] = useState('');
  const [plan, setPlan] = useState(null);
  const cfg = parseConfig(config);
  const leaseMs = lease.trim() ? parseDuration(lease) : undefined;

  const spec = {
    scale: { title: 'Scale', op: 'cluster.scale', body: () => ({ size: Number(size) }), ok: Number.isInteger(Number(size)) && Number(size) > 0 },
    add: { title: 'Add services', op: 'cluster.add_services', body: () => ({ services }), ok: services.length > 0 },
    remove: { title: 'Remove services', op: 'cluster.remove_services', body: () => ({ services }), ok: services.length > 0 },
    start: { title: 'Start services', op: 'cluster.start', body: () => (services.length ? { services } : {}), ok: true },
    stop: { title: 'Stop services', op: 'cluster.stop', body: () => (services.length ? { services } : {}), ok: true },
    restart: { title: 'Restart services', op: 'cluster.restart', body: () => (services.length ? { services } : {}), ok: true },
    reconfigure: { title: 'Reconfigure', op: 'cluster.reconfigure', body: () => ({ ...(cfg.value ? { config: cfg.value } : {}), restart }), ok: !cfg.error },
    upgrade: { title: 'Upgrade', op: 'cluster.upgrade', body: () => ({}), ok: true },
    rollback: { title: 'Roll back', op: 'cluster.rollback', body: () => ({}), ok: true },
    lease: { title: 'Extend the lease', op: 'cluster.extend_lease', body: () => (leaseMs ? { lease_ms: leaseMs } : {}), ok: leaseMs !== null, noPlan: true },
  }[kind];

  const preview = useAction(async () => setPlan(await api.call(spec.op, { cluster: cluster.id, ...spec.body(), dry_run: true })));
  // One error at a time: the last button's (a Preview and then a run refused
  // for the same reason say it once).
  const runPreview = () => { run.setError(null); preview.run(); };
  const run = useAction(async () => {
    const r = await api.call(spec.op, { cluster: cluster.id, ...spec.body() });
    onStarted(r);
    onClose();
  });

  let inputs = null;
  if (kind === 'scale') {
    inputs = html`<${Field} label="Nodes" hint=${`now ${cluster.size}`}>
      <input type="number" min="1" value=${size} onInput=${(e) => { setSize(e.target.value); setPlan(null); }} data-testid="scale-size" /><//>`;
  } else if (kind === 'add') {
    inputs = html`<div class="field"><span class="field-label">Services to add</span>
      <${ServicePicker} options=${addable} value=${services} onChange=${(v) => { setServices(v); setPlan(null); }} /></div>`;
  } else if (['remove', 'start', 'stop', 'restart'].includes(kind)) {
    inputs = html`<div class="field"><span class="field-label">Services${kind === 'remove' ? '' : ' (none ticked: all)'}</span>
      <${ServicePicker} options=${running} value=${services} onChange=${(v) => { setServices(v); setPlan(null); }} /></div>`;
  } else if (kind === 'reconfigure') {
    inputs = html`<${Field} label="Config change (JSON merge patch)" error=${cfg.error}>
        <textarea rows="6" value=${config} placeholder=${JSON.stringify(cluster.config || {})}
          onInput=${(e) => { setConfig(e.target.value); setPlan(null); }}></textarea><//>
      <label class="check"><input type="checkbox" checked=${restart} onChange=${() => setRestart(!restart)} />restart the services afterwards</label>`;
  } else if (kind === 'lease') {
    inputs = html`<${Field} label="Extend by" hint=${`expires ${until(cluster.expire_at_ms)}; empty: the template's step`}
        error=${leaseMs === null ? 'A duration such as 12h or 1d.' : null}>
      <input value=${lease} placeholder="12h" onInput=${(e) => setLease(e.target.value)} /><//>`;
  } else if (kind === 'upgrade') {
    inputs = html`<p>Moves the cluster to the latest version of its template and services; only what changed is reinstalled and restarted.</p>`;
  } else if (kind === 'rollback') {
    inputs = html`<p>Returns to the layout, services and config from before the last successful change.</p>`;
  }

  return html`<${Modal} title=${`${spec.title}: ${cluster.name}`} onClose=${onClose} footer=${html`
      ${spec.noPlan ? null : html`<button class="button" disabled=${!spec.ok || preview.busy} onClick=${runPreview}
        data-testid="preview-change">${preview.busy ? 'Planning…' : 'Preview'}</button>`}
      <button class="button primary" disabled=${!spec.ok || run.busy} onClick=${() => { preview.setError(null); run.run(); }}
        data-testid="run-change">${run.busy ? 'Starting…' : spec.title}</button>`}>
    ${inputs}
    ${plan ? html`<div class="card"><div class="card-body stack">
      <${PlanChange} plan=${plan} config=${kind === 'reconfigure' && cfg.value
        ? { patch: cfg.value, after: mergePatch(cluster.config || {}, cfg.value) } : null} />
      <div class="field-label">The cluster afterwards</div>
      <${PlanSummary} plan=${plan} /></div></div>` : null}
    <${ErrorNote} error=${preview.error || run.error} />
  <//>`;
}

const ACTIONS = [
  ['scale', 'Scale'], ['add', 'Add services'], ['remove', 'Remove services'], ['start', 'Start'], ['stop', 'Stop'],
  ['restart', 'Restart'], ['reconfigure', 'Reconfigure'], ['upgrade', 'Upgrade'], ['rollback', 'Roll back'], ['lease', 'Extend lease'],
];

export function ClusterScreen({ params }) {
  const id = params.cluster;
  const { data, error, reload } = useAsync(async () => {
    const loadedAt = Date.now();
    const d = await loadCluster(id);
    const template = await api.call('clustertemplate.get', { name: d.cluster.template }).then((r) => r.entity, () => null);
    return { ...d, template, loadedAt };
  }, [id]);
  const [job, setJob] = useState(null);
  const [clusterEvent, setClusterEvent] = useState(null);
  const [dialog, setDialog] = useState(null);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const later = useThrottle(reload, 700);

  // An event newer than the last read wins over it until the next read, in
  // every place the screen shows what it says: the next read comes up to
  // 700 ms later.
  const fresh = (e) => e && data && e.seq > data.loadedAt;
  const shownJob = fresh(job) && data.job && String(job.id) === String(data.job.id) ? job : data?.job;
  const clusterId = data?.cluster?.id;
  useEvents(clusterId ? { cluster: clusterId } : null, (e) => {
    if (String(e.data.cluster_id) !== String(clusterId)) return;
    if (e.type === 'job' && data?.job) setJob({ ...withJobEvent(shownJob || data.job, e.data), seq: Date.now() });
    if (e.type === 'cluster') setClusterEvent({ status: e.data.status, seq: Date.now() });
    later();
  }, reload);

  if (!data && error) return html`<${Page} title="Cluster"><${ErrorNote} error=${error} onRetry=${reload} /><//>`;
  if (!data) return html`<${Page} title="Cluster"><${Loading} /><//>`;
  const c = fresh(clusterEvent) ? { ...data.cluster, status: clusterEvent.status } : data.cluster;
  const jobs = (c.jobs || []).map((j) => (shownJob && String(j.id) === String(shownJob.id)
    ? { ...j, status: shownJob.status, message: shownJob.message, finished_at_ms: shownJob.finished_at_ms } : j));
  const terminated = c.status === 'terminated';
  const services = serviceSummary(c.nodes || []);
  // Nodes a failed job was to delete and did not ("delete failed"): weftd runs only a delete
  // or a scale (which deletes them again) until they are gone, and refuses every other change.
  const undeleted = (c.nodes || []).filter((n) => n.state === 'delete failed').map((n) => n.hostname);
  const kept = (c.nodes || []).length - undeleted.length;
  const blocked = (k) => undeleted.length > 0 && k !== 'scale' && k !== 'lease';
  // weftd runs one job at a time on a cluster: every change waits for the running one.
  const busy = shownJob && !jobEnded(shownJob.status) ? shownJob : null;

  return html`<${Page} title=${html`<span data-testid="cluster-name">${c.name}</span> <${StatusBadge} status=${c.status} />`}
      subtitle=${`${c.template} · ${nodesText((c.nodes || []).length, c.size, busy && !terminated ? busy.id : null)} · owner ${c.owner} · created ${dateTime(c.created_at_ms)}`}
      actions=${terminated ? null : html`
        <button class="button danger" onClick=${() => setConfirmDelete(true)} data-testid="delete-cluster">Delete</button>`}>
    <${ErrorNote} error=${error} onRetry=${reload} />
    ${data.undone && shownJob ? html`<${UndoneNote} undone=${data.undone} undo=${shownJob} />` : null}
    ${shownJob ? html`<${Card} title="Latest job"><${JobProgress} job=${shownJob} /><//>` : null}
    ${undeleted.length && !terminated ? html`<div class="warn-note" role="status" data-testid="delete-failed-note">
      <strong>${undeleted.length === 1 ? 'A node was not deleted' : `${undeleted.length} nodes were not deleted`}</strong>${
      ': the provider\'s DELETE failed for '}<span class="mono">${undeleted.join(', ')}</span>${'. '}${kept > 0
        ? html`<b>Scale</b>${` (to any size) deletes ${undeleted.length === 1 ? 'it' : 'them'} again and keeps the other ${
          kept === 1 ? 'node' : `${kept} nodes`}; `}<b>Delete</b>${' deletes the whole cluster. '}`
        : html`<b>Delete</b>${` deletes ${undeleted.length === 1 ? 'it' : 'them'} again. `}`}${
      'Other changes are refused until then.'}
    </div>` : null}
    ${terminated ? null : html`<div class="row" role="toolbar" aria-label="Cluster actions">
      ${ACTIONS.map(([k, label]) => html`<button class="button small"
        disabled=${(k === 'rollback' && !c.has_previous) || blocked(k) || !!busy}
        title=${busy ? `job #${busy.id} (${busy.operation}) is running: changes wait until it ends`
          : blocked(k) ? 'refused while the cluster has nodes whose DELETE failed: scale or delete first' : null}
        onClick=${() => setDialog(k)} data-testid=${'action-' + k}>${label}</button>`)}
    </div>
    ${busy ? html`<div class="muted" role="status" data-testid="actions-busy">${'Changes wait until '}<a
      href=${href('/jobs/' + busy.id)}>job #${busy.id}</a>${` (${busy.operation}) ends; it can be aborted on its page.`}</div>` : null}`}
    <div class="grid-2">
      <${Card} title="About">
        <${KeyValues} items=${[
          ['id', c.id], ['template', c.template], ['provider', c.provider || '—'],
          ['lease', terminated ? '—' : c.expire_at_ms ? `expires ${until(c.expire_at_ms)} (${dateTime(c.expire_at_ms)})` : 'none'],
          ['updated', ago(c.updated_at_ms)],
        ]} />
      <//>
      <${Card} title="Services">
        <${Table} testid="services" rows=${services} rowKey=${(s) => s.service} empty="No services."
          columns=${[
            { title: 'Service', key: 'service' },
            { title: 'Nodes', className: 'num', key: 'nodes' },
            { title: 'State', render: (s) => html`<span class="chips">${Object.entries(s.states).map(([st, n]) => html`
              <span><${StatusBadge} status=${st} />${Object.keys(s.states).length > 1 || n !== s.nodes ? ` ×${n}` : ''}</span>`)}</span>` },
          ]} />
      <//>
    </div>
    <${Card} title="Config">
      ${Object.keys(c.config || {}).length ? html`<pre class="output" data-testid="cluster-config">${JSON.stringify(c.config, null, 2)}</pre>`
        : html`<div class="muted" data-testid="cluster-config">No config of the cluster's own: its services use their defaults.</div>`}
    <//>
    <${Card} title=${`Nodes (${(c.nodes || []).length})`}>
      <${Table} testid="nodes" rows=${c.nodes || []} rowKey=${(n) => n.hostname} empty=${terminated ? 'The nodes are deleted.' : 'No node yet.'}
        columns=${[
          // A node a failed job was to delete and did not ("delete failed"): the next delete or scale deletes it,
          // and weftd refuses every other operation until then.
          { title: 'Hostname', render: (n) => html`<span class="mono">${n.hostname}</span>${n.state ? html` <span
            title="a job was to delete this node and its DELETE failed; the next delete or scale deletes it, and no other operation runs until then"
            data-testid="node-state"><${StatusBadge} status=${n.state} /></span>` : ''}` },
          { title: 'Address', render: (n) => (address(n) ? html`<span class="mono">${address(n)}</span>` : html`<span class="muted">—</span>`) },
          { title: 'Hardware', key: 'hardwaretype' },
          { title: 'Image', key: 'imagetype' },
          { title: 'Services', className: 'wrap', render: (n) => html`<span class="chips">${(n.services || []).map((s) => html`
            <span class="chip" title=${(n.service_states || {})[s] || 'unknown'}>${s}
              <${StatusBadge} status=${(n.service_states || {})[s] || 'unknown'} /></span>`)}</span>` },
        ]} />
    <//>
    <${Card} title="Jobs">
      <${Table} testid="jobs" rows=${jobs} onRow=${(j) => navigate('/jobs/' + j.id)}
        columns=${[
          { title: 'Job', render: (j) => html`<a href=${href('/jobs/' + j.id)}>#${j.id}</a>` },
          { title: 'Operation', key: 'operation' },
          { title: 'Status', render: (j) => html`<${StatusBadge} status=${j.status} />` },
          { title: 'Asked by', key: 'requested_by' },
          { title: 'Started', render: (j) => ago(j.created_at_ms) },
          { title: 'Took', render: (j) => (j.finished_at_ms ? duration(j.finished_at_ms - j.created_at_ms) : '—') },
          { title: 'Message', className: 'wrap', render: (j) => html`<span class="message">${j.message}</span>` },
        ]} />
    <//>
    ${dialog ? html`<${ChangeDialog} kind=${dialog} cluster=${c} template=${data.template} onClose=${() => setDialog(null)}
      onStarted=${() => reload()} />` : null}
    ${confirmDelete ? html`<${ConfirmDialog} title=${`Delete ${c.name}?`} danger confirmLabel="Delete cluster" typeToConfirm=${c.name}
      message=${`Every one of its ${c.size} nodes is deleted, with what runs on them. This cannot be undone.`}
      onConfirm=${async () => { await api.call('cluster.delete', { cluster: c.id }); reload(); }}
      onClose=${() => setConfirmDelete(false)} />` : null}
  <//>`;
}
