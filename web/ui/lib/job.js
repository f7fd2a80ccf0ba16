// A job's progress as a bar, kept live from the events stream.
import { html, useState, useEffect } from './html.js';
import { href } from './router.js';
import { ProgressBar, StatusBadge } from './components.js';
import { duration, plural } from './format.js';
import * as api from './api.js';

const ENDED = new Set(['succeeded', 'failed', 'aborted']);
export function jobEnded(status) { return ENDED.has(status); }

// Folds a `job` event's counts into a job.get reply's job, so the bar moves
// the moment the event arrives, before the next read.
export function withJobEvent(job, event) {
  if (!job || String(event.job_id) !== String(job.id)) return job;
  const progress = { ...(job.progress || {}) };
  for (const k of ['total', 'succeeded', 'failed', 'cancelled']) if (event[k] != null) progress[k] = event[k];
  // An ended job runs nothing more; the next read gives the exact counts.
  if (jobEnded(event.status)) Object.assign(progress, { running: 0, queued: 0, retrying: 0 });
  // A running job's finished_at_ms is 0.
  const finished = jobEnded(event.status) ? job.finished_at_ms || event.at_ms : job.finished_at_ms;
  return { ...job, status: event.status || job.status, message: event.message ?? job.message, progress, finished_at_ms: finished };
}

// The progress bar's words, counting what `weft job show` counts:
// "18/24 tasks done · 4 failed · 2 cancelled · stage 4/4".
export function progressLabel(p = {}) {
  const total = p.total || 0;
  const parts = [];
  if (p.running) parts.push(`${p.running} running`);
  if (p.queued) parts.push(`${p.queued} queued`);
  if (p.retrying) parts.push(`${p.retrying} retrying`);
  if (p.failed) parts.push(`${p.failed} failed`);
  if (p.cancelled) parts.push(`${p.cancelled} cancelled`);
  if (p.stages) parts.push(`stage ${Math.min(p.stage ?? 0, p.stages)}/${p.stages}`);
  return `${p.succeeded || 0}/${total} tasks done${parts.length ? ' · ' + parts.join(' · ') : ''}`;
}

// Draws again every `ms` while `on`: a running job's time counts between its events.
function useTick(on, ms = 1000) {
  const [, setTicks] = useState(0);
  useEffect(() => {
    if (!on) return undefined;
    const timer = setInterval(() => setTicks((n) => n + 1), ms);
    return () => clearInterval(timer);
  }, [on, ms]);
}

// Why a job's tasks wait (job.get's waiting_for_plugins): no live host runs
// their plugins, because none is connected (server.status counts the live
// hosts, as `weft status` does) or none of those connected offers them.
export function WaitingForHosts({ plugins }) {
  const [hosts, setHosts] = useState(null);
  const waiting = (plugins || []).join(', ');
  useEffect(() => {
    if (!waiting) return undefined;
    let current = true;
    api.call('server.status', {}).then((s) => { if (current) setHosts(s.hosts || null); }, () => {});
    return () => { current = false; };
  }, [waiting]);
  if (!waiting) return null;
  const them = plugins.length === 1 ? 'it' : 'them';
  let why = `No connected host offers ${them}: the tasks stay queued until one does.`;
  if (hosts && hosts.live === 0) {
    why = `No host is connected (${hosts.registered || 0} registered, none live): the tasks stay queued until one is.`;
  } else if (hosts && hosts.live > 0) {
    why = `${plural(hosts.live, 'host is', 'hosts are')} connected, and none offers ${them}: the tasks stay queued until one that does connects.`;
  }
  return html`<div class="info-note" data-testid="waiting-for-plugins">
    <div>${`Waiting for a live host that runs ${waiting}.`}</div>
    <div class="muted" data-testid="waiting-why">${why} An administrator can start one, or see on the Hosts screen why none is live.</div>
  </div>`;
}

export function JobProgress({ job }) {
  const p = job.progress || {};
  const total = p.total || 0;
  const ended = jobEnded(job.status);
  useTick(!ended);
  const elapsed = (job.finished_at_ms || Date.now()) - job.created_at_ms;
  return html`<div class="stack" data-testid="job-progress" data-status=${job.status}>
    <div class="row">
      <a href=${href('/jobs/' + job.id)}><strong>Job #${job.id}</strong></a>
      <span>${job.operation}</span>
      <${StatusBadge} status=${job.status} />
      <span class="spacer"></span>
      <span class="muted" data-testid="job-elapsed">${ended ? 'took' : 'running for'} ${duration(Math.max(0, elapsed))}</span>
    </div>
    <${ProgressBar} done=${p.succeeded || 0} failed=${p.failed || 0} total=${total} status=${job.status}
      label=${progressLabel(p)} />
    ${job.message ? html`<div class=${job.status === 'failed' || job.status === 'failing' ? 'error-note' : 'muted'}
      data-testid="job-message">${job.message}</div>` : null}
    <${WaitingForHosts} plugins=${job.waiting_for_plugins} />
  </div>`;
}
