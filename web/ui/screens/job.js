// One job: its progress, its tasks as a graph, each task's attempts, output
// and timings; abort and retry.
import { html, useState } from '../lib/html.js';
import * as api from '../lib/api.js';
import { href } from '../lib/router.js';
import {
  useAsync, useThrottle, ErrorNote, Loading, Page, Card, StatusBadge, Table, ConfirmDialog, KeyValues,
} from '../lib/components.js';
import { useEvents } from '../lib/events.js';
import { JobProgress, withJobEvent, jobEnded } from '../lib/job.js';
import { TaskGraph, DagLegend } from '../lib/dag.js';
import { dateTime, duration, ago } from '../lib/format.js';

function Output({ task }) {
  const out = (task.stdout || '').trimEnd();
  const err = (task.stderr || '').trimEnd();
  if (!out && !err) return html`<div class="muted">No output.</div>`;
  return html`<div class="stack">
    ${out ? html`<div><div class="field-label">stdout</div><pre class="output" data-testid="stdout">${out}</pre></div>` : null}
    ${err ? html`<div><div class="field-label">stderr</div><pre class="output stderr" data-testid="stderr">${err}</pre></div>` : null}
  </div>`;
}

// A task that failed, with its message and output: of this run, or of an
// earlier one (job.get's history keeps them, since a retry overwrites the task).
function FailedTask({ task }) {
  return html`<div class="stack">
    <div class="row"><strong class="mono">${task.key || task.id}</strong>
      <span class="muted">attempt ${task.attempt}${task.max_attempts ? ` of ${task.max_attempts}` : ''} on ${task.host_id || '—'}</span></div>
    ${task.message ? html`<div class="error-note">${task.message}</div>` : null}
    <${Output} task=${task} />
  </div>`;
}

function TaskDetail({ task, state }) {
  const attempts = task.attempts || [];
  return html`<div class="stack" data-testid="task-detail">
    <div class="row"><strong class="mono">${task.key || task.id}</strong><${StatusBadge} status=${state} /></div>
    <${KeyValues} items=${[
      ['node', html`<span class="mono">${task.node}</span>`],
      ['action', `${task.action}${task.service ? ' ' + task.service : ''}`],
      ['plugin', task.plugin || '—'],
      ['attempt', `${task.attempt || 0} of ${task.max_attempts || '?'}`],
      ['host', task.host_id || '—'],
      ['created', dateTime(task.created_at_ms)],
      ['updated', `${dateTime(task.updated_at_ms)} (${ago(task.updated_at_ms)})`],
      task.message ? ['message', html`<span class=${state === 'failed' ? 'error-message' : ''}>${task.message}</span>`] : null,
    ]} />
    ${attempts.length ? html`<${Table} rows=${attempts} rowKey=${(a) => a.attempt}
      columns=${[
        { title: 'Attempt', className: 'num', key: 'attempt' },
        { title: 'Host', key: 'host_id' },
        { title: 'Status', render: (a) => html`<${StatusBadge} status=${a.status} />` },
        { title: 'Taken', render: (a) => dateTime(a.taken_at_ms) },
        { title: 'Took', render: (a) => (a.finished_at_ms ? duration(a.finished_at_ms - a.taken_at_ms) : 'running') },
        { title: 'Message', className: 'wrap', render: (a) => html`<span class="message">${a.message}</span>` },
      ]} />` : null}
    <${Output} task=${task} />
  </div>`;
}

export function JobScreen({ params }) {
  const id = params.job;
  const { data, error, reload } = useAsync(async () => {
    const loadedAt = Date.now();
    const { job } = await api.call('job.get', { job: id, details: true });
    const cluster = await api.call('cluster.get', { cluster: job.cluster_id }).then((r) => r.cluster, () => null);
    return { job, cluster, loadedAt };
  }, [id]);
  const [live, setLive] = useState({ states: {}, job: null, at: 0 });
  const [selected, setSelected] = useState(null);
  const [ask, setAsk] = useState(null);
  const later = useThrottle(reload, 800);

  const job = data?.job;
  const fresh = live.at > (data?.loadedAt || 0);
  const states = fresh ? live.states : {};
  const shown = job && fresh && live.job ? live.job : job;
  useEvents(job ? { cluster: job.cluster_id } : null, (e) => {
    const d = e.data;
    if (e.type === 'task' && d.task_id != null && job.tasks.some((t) => String(t.id) === String(d.task_id))) {
      setLive((l) => ({ ...l, states: { ...(l.at > data.loadedAt ? l.states : {}), [String(d.task_id)]: d.state }, at: Date.now() }));
      later();
    } else if (e.type === 'job' && String(d.job_id) === String(job.id)) {
      setLive((l) => ({ ...l, job: withJobEvent(l.job && l.at > data.loadedAt ? l.job : job, d), at: Date.now() }));
      later();
    }
  }, reload);

  if (!data && error) return html`<${Page} title=${`Job #${id}`}><${ErrorNote} error=${error} onRetry=${reload} /><//>`;
  if (!data) return html`<${Page} title=${`Job #${id}`}><${Loading} /><//>`;
  const tasks = job.tasks || [];
  const stateOf = (t) => states[String(t.id)] || t.state;
  const failed = tasks.filter((t) => stateOf(t) === 'failed');
  const chosen = tasks.find((t) => String(t.id) === String(selected));
  const canAbort = !jobEnded(shown.status);
  const canRetry = shown.status === 'failed' || shown.status === 'aborted';
  const clusterName = data.cluster ? data.cluster.name : `cluster ${job.cluster_id}`;

  return html`<${Page} title=${html`Job #${job.id} <${StatusBadge} status=${shown.status} />`}
      subtitle=${html`${job.operation} of <a href=${href('/clusters/' + job.cluster_id)}>${clusterName}</a> · asked by ${job.requested_by} · ${dateTime(job.created_at_ms)}`}
      actions=${html`
        ${canAbort ? html`<button class="button danger" onClick=${() => setAsk('abort')} data-testid="abort">Abort</button>` : null}
        ${canRetry ? html`<button class="button primary" onClick=${() => setAsk('retry')} data-testid="retry">Retry</button>` : null}`}>
    <${ErrorNote} error=${error} onRetry=${reload} />
    <${Card} title="Progress"><${JobProgress} job=${shown} /><//>
    ${failed.length ? html`<${Card} title=${`Failed tasks (${failed.length})`} className="failed-tasks">
      <div class="stack" data-testid="failed-tasks">${failed.slice(0, 10).map((t) => html`<${FailedTask} task=${t} />`)}</div>
    <//>` : null}
    <${Card} title=${`Tasks (${tasks.length})`} actions=${html`<${DagLegend} />`}>
      <div class="stack">
        ${tasks.length ? html`<${TaskGraph} tasks=${tasks} states=${states} selected=${selected} onSelect=${setSelected} />`
          : html`<div class="empty">No tasks.</div>`}
        ${chosen ? html`<div class="card"><div class="card-body"><${TaskDetail} task=${chosen} state=${stateOf(chosen)} /></div></div>`
          : html`<div class="muted">Click a task to see its attempts and output.</div>`}
      </div>
    <//>
    ${(job.history || []).length ? html`<${Card} title="Earlier runs">
      <div class="stack" data-testid="earlier-runs">
      <${Table} rows=${job.history} rowKey=${(h) => h.run} columns=${[
        { title: 'Run', className: 'num', key: 'run' },
        { title: 'Status', render: (h) => html`<${StatusBadge} status=${h.status} />` },
        { title: 'Started', render: (h) => dateTime(h.started_at_ms) },
        { title: 'Took', render: (h) => (h.finished_at_ms ? duration(h.finished_at_ms - h.started_at_ms) : '—') },
        { title: 'Retried by', key: 'retried_by' },
        { title: 'Failed', className: 'num', key: 'failed' },
        { title: 'Message', className: 'wrap', render: (h) => html`<span class="message">${h.message}</span>` },
      ]} />
      ${job.history.filter((h) => (h.failed_tasks || []).length).map((h) => html`<details class="earlier-run" open
          data-testid="earlier-failed-tasks" data-run=${h.run}>
        <summary>${`What failed in run ${h.run} (${h.failed_tasks.length}${h.failed > h.failed_tasks.length
          ? ` of ${h.failed}` : ''} ${h.failed_tasks.length === 1 ? 'task' : 'tasks'})`}</summary>
        <div class="stack">${h.failed_tasks.map((t) => html`<${FailedTask} task=${t} />`)}</div>
      </details>`)}
      </div>
    <//>` : null}
    ${ask === 'abort' ? html`<${ConfirmDialog} title=${`Abort job #${job.id}?`} danger confirmLabel="Abort job"
      message="Tasks not started are cancelled and running attempts are stopped. Nothing is undone; the cluster becomes incomplete."
      onConfirm=${async () => { await api.call('job.abort', { job: job.id }); reload(); }} onClose=${() => setAsk(null)} />` : null}
    ${ask === 'retry' ? html`<${ConfirmDialog} title=${`Retry job #${job.id}?`} confirmLabel="Retry"
      message=${'The job runs again from where it stopped: failed tasks get new attempts, cancelled ones wait for their '
        + 'predecessors again. It runs as it was planned, with the service definitions and config it was made with, '
        + 'not the catalog\'s current ones: after a service was fixed in the catalog, use Upgrade on the cluster instead.'}
      onConfirm=${async () => { await api.call('job.retry', { job: job.id }); reload(); }} onClose=${() => setAsk(null)} />` : null}
  <//>`;
}
